"""``odfd list``: the datasets in the workspace (``--wide``: records, data size, watermark)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, read_in_node, run_in_node
from protocol.model import AddData, ExecuteTransform

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace

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
            _write(args, [_row(record) for record in records])
            return 0

    async def run(node: Node) -> int:
        workspace = node.workspace
        rows = []
        for record in await workspace.list_datasets():
            row = _row(record)
            if args.wide:
                row.update(await _details(workspace, record))
            rows.append(row)
        _write(args, rows)
        return 0

    return run_in_node(args, run)


def _write(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    if args.output == "table":
        for row in rows:
            row["head_short"] = None if row["head"] is None else row["head"][-8:]
            row["updated_short"] = row["updated"][:19].replace("T", " ")
            if args.wide:
                from verifier.progress import format_bytes  # only here: the verifier's report

                row["size_short"] = format_bytes(row["size"])
    write_records(rows, args.output, _WIDE_COLUMNS if args.wide else _COLUMNS)


def _row(r: DatasetRecord) -> dict[str, Any]:
    return {
        "id": str(r.id),
        "alias": r.alias,
        "kind": r.kind.value,
        "head": None if r.head is None else str(r.head),
        "blocks": None if r.head_sequence is None else r.head_sequence + 1,
        "created": r.created_at.isoformat().replace("+00:00", "Z"),
        "updated": r.updated_at.isoformat().replace("+00:00", "Z"),
    }


async def _details(workspace: Workspace, record: DatasetRecord) -> dict[str, Any]:
    dataset = workspace.open_dataset(record.id)
    state = await dataset.chain.state()
    size = 0
    async for _, block in dataset.chain.iter_blocks():
        event = block.event
        if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
            size += event.new_data.size
    watermark = state.last_watermark
    return {
        "records": 0 if state.last_offset is None else state.last_offset + 1,
        "size": size,
        "watermark": None if watermark is None else watermark.to_rfc3339(),
    }
