"""``odfd log``: a dataset's blocks, newest first, as YAML manifests (like the reference) or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from protocol.codec import json as odf_json
from protocol.codec import yaml as odf_yaml
from protocol.model import MetadataBlock, kind_name
from storage.workspace import Workspace

_GROUPS = {
    "data": {"AddData", "ExecuteTransform"},
    "watermark": {"AddData", "ExecuteTransform"},
    "source": {"Seed", "SetPollingSource", "AddPushSource", "SetTransform", "SetVocab"},
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("log", help="show a dataset's metadata blocks, newest first")
    parser.add_argument("dataset", help="dataset alias or id")
    parser.add_argument("--output", choices=("yaml", "json"), default="yaml")
    parser.add_argument(
        "--filter",
        metavar="KINDS",
        help="comma-separated event kinds (e.g. AddData,SetInfo) or groups "
        "(data, watermark, source)",
    )
    parser.add_argument("--limit", type=int, default=None, help="show at most this many blocks")
    add_root_argument(parser)
    parser.set_defaults(func=_log)


def _kinds(spec: str | None) -> set[str] | None:
    if spec is None:
        return None
    kinds: set[str] = set()
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        kinds |= _GROUPS.get(part.lower(), {part})
    return {k.lower() for k in kinds}


def _log(args: argparse.Namespace) -> int:
    kinds = _kinds(args.filter)

    async def run(workspace: Workspace) -> int:
        dataset = await workspace.get_dataset(args.dataset)
        shown: list[dict[str, Any]] = []
        async for hash, block in dataset.chain.iter_blocks():
            if args.limit is not None and len(shown) >= args.limit:
                break
            if kinds is not None and kind_name(block.event).lower() not in kinds:
                continue
            if args.output == "yaml":
                sys.stdout.write(_yaml(hash, block))
            shown.append({"hash": str(hash), "block": json.loads(odf_json.dump_block(block))})
        if args.output == "json":
            print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0

    return run_in_workspace(args, run)


def _yaml(hash: object, block: MetadataBlock) -> str:
    return f"---\n# Block: {hash}\n{odf_yaml.dump_block(block)}\n"
