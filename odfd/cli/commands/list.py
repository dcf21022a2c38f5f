"""``odfd list``: the datasets in the workspace (``--wide``: records, data size, watermark)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from odfd.app.dataset_rows import dataset_row
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, read_in_node, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node

_COLUMNS = [
    ("Name", "alias"),
    ("Kind", "kind"),
    ("Blocks", "blocks"),
    ("Head", "head_short"),
    ("Updated", "updated_short"),
]
_WIDE_COLUMNS = [
    *_COLUMNS[:3],
    ("Records", "records"),
    ("Size", "size_short"),
    ("Watermark", "watermark"),
    *_COLUMNS[3:],
]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("list", help="list the datasets in the workspace")
    add_output_format(parser)
    parser.add_argument(
        "-w",
        "--wide",
        action="store_true",
        help="also show records, data size and watermark (reads each dataset's chain)",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_list)


def _list(args: argparse.Namespace) -> int:
    if not args.wide:  # the catalog alone: read without an event loop
        records = read_in_node(args, lambda catalog, _: catalog.list_datasets())
        if records is not None:
            _write(args, [dataset_row(record) for record in records])
            return 0

    async def run(node: Node) -> int:
        from odfd.app.datasets import list_datasets

        _write(args, await list_datasets(node, wide=args.wide))
        return 0

    return run_in_node(args, run)


def _write(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    if args.output == "table":
        for row in rows:
            row["head_short"] = None if row["head"] is None else row["head"][-8:]
            row["updated_short"] = row["updated"][:19].replace("T", " ")
            if args.wide:
                from odfd.app.progress_display import format_bytes  # only here: a byte size

                row["size_short"] = format_bytes(row["size"])
    write_records(rows, args.output, _WIDE_COLUMNS if args.wide else _COLUMNS)
