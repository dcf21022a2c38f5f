"""``odfd list``: the datasets in the workspace, as a table or JSON."""

from __future__ import annotations

import argparse
import json

from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("list", help="list the datasets in the workspace")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    add_root_argument(parser)
    parser.set_defaults(func=_list)


def _list(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        records = await workspace.list_datasets()
        rows = [
            {
                "id": str(r.id),
                "alias": r.alias,
                "kind": r.kind.value,
                "head": None if r.head is None else str(r.head),
                "blocks": None if r.head_sequence is None else r.head_sequence + 1,
                "created": r.created_at.isoformat().replace("+00:00", "Z"),
                "updated": r.updated_at.isoformat().replace("+00:00", "Z"),
            }
            for r in records
        ]
        if args.output == "json":
            print(json.dumps(rows, indent=2))
            return 0
        print(_table(rows))
        return 0

    return run_in_workspace(args, run)


def _table(rows: list[dict]) -> str:
    columns = [
        ("Name", "alias"),
        ("Kind", "kind"),
        ("Blocks", "blocks"),
        ("Head", "head"),
        ("Updated", "updated"),
    ]
    cells = [[h for h, _ in columns]] + [
        [_short(key, row[key]) for _, key in columns] for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def _short(key: str, value: object) -> str:
    if value is None:
        return "-"
    if key == "head":
        return str(value)[-8:]
    if key == "updated":
        return str(value)[:19].replace("T", " ")
    return str(value)
