"""``odfd import``: register existing dataset folders (e.g. written by kamu) after validation."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="copy an existing dataset folder into the workspace after validating its chain",
    )
    parser.add_argument("path", type=Path, help="dataset folder (blocks/, refs/, data/, ...)")
    parser.add_argument("--name", help="alias (default: the folder's info/alias)")
    add_root_argument(parser)
    parser.set_defaults(func=_import)


def _import(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.datasets import import_dataset

        record = await import_dataset(node, args.path, args.name)
        print(
            f"Imported: {record.alias} ({record.id}), {record.head_sequence + 1} blocks",  # type: ignore[operator]  # an imported dataset has a head
            file=sys.stderr,
        )
        return 0

    return run_in_node(args, run)
