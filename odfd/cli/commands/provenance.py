"""``odfd provenance``: why a derivative's row exists — the input rows it came from, down to the
ingests of root datasets, each answer checked by re-running the transform on its witnesses."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from odfd.cli import console
from odfd.cli.arguments import non_negative_int, positive_int
from odfd.cli.output import add_output_format
from odfd.cli.workspace_args import add_root_argument, run_in_workspace

HELP = "trace rows of a derivative dataset back to the input rows and ingests they came from"

#: Witness rows of one row shown in the tree (``-o json`` lists all).
TREE_ROWS = 20


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "provenance",
        help=HELP,
        description=HELP + ". Each answer is checked: the transform, re-run on the witness rows "
        "alone, must give the row again.",
    )
    parser.add_argument("dataset", metavar="DATASET", help="derivative dataset alias or id")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--offset",
        type=non_negative_int,
        nargs="+",
        metavar="N",
        help="the row(s) at these offsets",
    )
    which.add_argument(
        "--where",
        metavar="PREDICATE",
        help="the rows matching a DataFusion SQL predicate, e.g. \"symbol = 'B'\"",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=20,
        metavar="N",
        help="trace at most N of the rows --where selects (default 20)",
    )
    parser.add_argument(
        "--depth",
        type=positive_int,
        default=None,
        metavar="N",
        help="levels of inputs to trace (1: the direct inputs; default: down to root datasets)",
    )
    parser.add_argument(
        "--max-rows",
        type=positive_int,
        default=1000,
        metavar="N",
        help="witness rows of one dataset traced further at each level (default 1000)",
    )
    add_output_format(parser, ("table", "json"))
    add_root_argument(parser)
    parser.set_defaults(func=_provenance)


def _provenance(args: argparse.Namespace) -> int:
    from odfd.coordinator.commit import RUN_DIR
    from odfd.coordinator.engine import open_engines
    from protocol.identity import DatasetId, DatasetRef
    from storage.dataset import Dataset
    from storage.workspace import Workspace
    from verifier.provenance.trace import TraceOptions, Tracer

    async def run(workspace: Workspace) -> int:
        engines = open_engines(workspace.layout.config_path)
        record = await workspace.resolve(args.dataset)

        async def open_dataset(dataset_id: DatasetId) -> tuple[Dataset, str]:
            found = await workspace.resolve(DatasetRef(dataset_id))
            return workspace.open_dataset(dataset_id), str(found.alias)

        options = TraceOptions(
            depth=args.depth, max_rows=args.max_rows, scratch_dir=workspace.root / RUN_DIR
        )
        tracer = Tracer(open_dataset, engines, options)
        offsets = list(args.offset or [])
        if args.where is not None:
            offsets = await tracer.select_offsets(record.id, args.where)
            if not offsets:
                console.warn(f"no row of {record.alias} matches {args.where}")
                return 1
            if len(offsets) > args.limit:
                console.info(f"{len(offsets)} rows match; tracing the first {args.limit} (--limit)")
                offsets = offsets[: args.limit]
        rows = await tracer.explain(record.id, offsets)
        if args.output == "json":
            json.dump([row.to_json() for row in rows], sys.stdout, indent=2, default=str)
            sys.stdout.write("\n")
        else:
            for row in rows:
                sys.stdout.write("\n".join(render_tree(row)) + "\n")
        console.info(f"{len(rows)} row(s) traced, each checked by re-execution")
        return 0

    return run_in_workspace(args, run)


def render_tree(row: Any, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    """A row and its witnesses as an indented tree (``Any``: a ``RowProvenance``, imported
    only when the command runs)."""
    branch = "" if top else ("└─ " if last else "├─ ")
    lines = [prefix + branch + _headline(row)]
    inner = prefix + ("" if top else ("   " if last else "│  "))
    detail = inner + ("│  " if row.inputs else "   ")
    if row.columns:
        copies = ", ".join(f"{out} ← {source}" for out, source in row.columns.items())
        lines.append(f"{detail}columns: {copies}")
    if row.ingest is not None:
        ingest = row.ingest
        state = ""
        if ingest.source_state is not None:
            state = f", state {ingest.source_state['kind']} {ingest.source_state['value']}"
        lines.append(f"{detail}ingested: {ingest.source}{state}, at {ingest.system_time}")
    if row.derived and not row.traced:
        lines.append(f"{detail}(not traced further: --depth or --max-rows)")
    shown = row.inputs[:TREE_ROWS]
    for number, witness in enumerate(shown):
        end = number == len(shown) - 1 and len(row.inputs) <= TREE_ROWS
        lines.extend(render_tree(witness, inner, end, top=False))
    if len(row.inputs) > TREE_ROWS:
        lines.append(f"{inner}└─ … {len(row.inputs) - TREE_ROWS} more witness row(s) (-o json)")
    return lines


def _headline(row: Any) -> str:
    block = f"block #{row.block_sequence} {row.block_hash[:12]}…"
    text = f"{row.dataset} offset {row.offset} ({block})"
    if row.values:
        shown = {k: v for k, v in row.values.items() if k not in ("offset", "op", "system_time")}
        text += "  " + ", ".join(f"{k}={v}" for k, v in shown.items())
    if row.derived and row.traced:
        witnesses = len(row.inputs)
        text += f"  [{witnesses} witness row(s), checked by re-execution]"
    return text
