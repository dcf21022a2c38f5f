"""``odfd provenance``: why a derivative's row exists — the input rows it came from, down to the
ingests of root datasets, each answer checked by re-running the transform on its witnesses."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from odfd.app.events import Event, event_from_json
from odfd.app.provenance import EVENTS, ProvenanceRequest, ProvenanceResult, TracingFirst
from odfd.cli import terminal
from odfd.cli.arguments import non_negative_int, positive_int
from odfd.cli.output import add_output_format
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node

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
    parser.set_defaults(func=_provenance, forward=forward)


def _request(args: argparse.Namespace) -> ProvenanceRequest:
    return ProvenanceRequest(
        args.dataset,
        offsets=tuple(args.offset or ()),
        where=args.where,
        limit=args.limit,
        depth=args.depth,
        max_rows=args.max_rows,
    )


def forward(args: argparse.Namespace) -> tuple[ProvenanceRequest, Rendering]:
    """The request a daemon runs for this command line."""
    return _request(args), Rendering(args)


def _provenance(args: argparse.Namespace) -> int:
    from odfd.app.provenance import trace

    async def run(node: Node) -> int:
        return render(args, await trace(node, _request(args), Printer()))

    return run_in_node(args, run)


class Printer:
    """A trace's events as status lines."""

    def emit(self, event: Event) -> None:
        if isinstance(event, TracingFirst):
            terminal.info(f"{event.matched} rows match; tracing the first {event.limit} (--limit)")


class Rendering:
    """What the daemon answers, printed as a local run prints it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def event(self, data: dict[str, Any]) -> None:
        Printer().emit(event_from_json(data, EVENTS))

    def result(self, data: Any) -> int:
        return render(self.args, ProvenanceResult.from_json(data))


def render(args: argparse.Namespace, result: ProvenanceResult) -> int:
    """The traced rows on stdout as ``--output`` asks; the exit code."""
    if not result.rows:
        terminal.warn(f"no row of {result.dataset} matches {args.where}")
        return 1
    if args.output == "json":
        json.dump(result.rows, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        for row in result.rows:
            sys.stdout.write("\n".join(render_tree(row)) + "\n")
    terminal.info(f"{len(result.rows)} row(s) traced, each checked by re-execution")
    return 0


def render_tree(
    row: dict[str, Any], prefix: str = "", last: bool = True, top: bool = True
) -> list[str]:
    """A row and its witnesses (their JSON form, ``RowProvenance.to_json``) as an indented tree."""
    branch = "" if top else ("└─ " if last else "├─ ")
    lines = [prefix + branch + _headline(row)]
    inner = prefix + ("" if top else ("   " if last else "│  "))
    inputs = row.get("inputs", [])
    detail = inner + ("│  " if inputs else "   ")
    if row.get("columns"):
        copies = ", ".join(f"{out} ← {source}" for out, source in row["columns"].items())
        lines.append(f"{detail}columns: {copies}")
    ingest = row.get("ingest")
    if ingest is not None:
        state = ""
        if ingest["sourceState"] is not None:
            state = f", state {ingest['sourceState']['kind']} {ingest['sourceState']['value']}"
        lines.append(f"{detail}ingested: {ingest['source']}{state}, at {ingest['systemTime']}")
    if row["derived"] and not row.get("traced"):
        lines.append(f"{detail}(not traced further: --depth or --max-rows)")
    shown = inputs[:TREE_ROWS]
    for number, witness in enumerate(shown):
        end = number == len(shown) - 1 and len(inputs) <= TREE_ROWS
        lines.extend(render_tree(witness, inner, end, top=False))
    if len(inputs) > TREE_ROWS:
        lines.append(f"{inner}└─ … {len(inputs) - TREE_ROWS} more witness row(s) (-o json)")
    return lines


def _headline(row: dict[str, Any]) -> str:
    block = row["block"]
    text = f"{row['dataset']} offset {row['offset']} (block #{block['sequenceNumber']} {block['hash'][:12]}…)"
    if row.get("values"):
        shown = {k: v for k, v in row["values"].items() if k not in ("offset", "op", "system_time")}
        text += "  " + ", ".join(f"{k}={v}" for k, v in shown.items())
    if row["derived"] and row.get("traced"):
        witnesses = len(row.get("inputs", []))
        text += f"  [{witnesses} witness row(s), checked by re-execution]"
    return text
