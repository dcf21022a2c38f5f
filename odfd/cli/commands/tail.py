"""``odfd tail``: the last records of a dataset (read straight from its newest slices, no Spark)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from odfd.app.result_formats import FORMATS, check_output_args, write_result
from odfd.cli.arguments import non_negative_int, positive_int
from odfd.cli.output import add_output_format
from odfd.cli.presence import require_files
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.coordinator.query import AsOf, dataset_view, resolve_as_of

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tail", help="show the last records of a dataset")
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "-n",
        "--num-records",
        type=positive_int,
        default=10,
        metavar="N",
        help="how many (default 10)",
    )
    parser.add_argument(
        "-s",
        "--skip-records",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="leave out the last N records first (page backwards through a dataset)",
    )
    add_output_format(parser, FORMATS)
    parser.add_argument(
        "--output-path", type=Path, metavar="FILE", help="write to FILE (required for parquet)"
    )
    parser.add_argument(
        "--as-of", metavar="BLOCK|TIME", help="show the dataset as of a block hash or time"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_tail)


def _tail(args: argparse.Namespace) -> int:
    check_output_args(args.output, args.output_path)

    async def run(node: Node) -> int:
        workspace = node.workspace
        record = await workspace.resolve(args.dataset)
        dataset = workspace.open_dataset(record.id)
        block = time = None
        if args.as_of:
            block, time = await resolve_as_of(workspace, AsOf.parse(args.as_of))
        view = await dataset_view(dataset, pinned_block=block, pinned_time=time)
        await require_files(workspace, record, view)
        records = last_records(view.paths, view.schema, args.num_records + args.skip_records)
        if args.skip_records:
            records = records.slice(0, max(records.num_rows - args.skip_records, 0))
        write_result(records, args.output, args.output_path)
        return 0

    return run_in_node(args, run)


def last_records(paths: tuple, schema: pa.Schema | None, n: int) -> pa.Table:
    """The last ``n`` records of the slices (oldest first), reading only the row groups needed."""
    parts: list[pa.Table] = []
    remaining = n
    for path in reversed(paths):
        parquet = pq.ParquetFile(str(path))
        for group in reversed(range(parquet.num_row_groups)):
            if remaining <= 0:
                break
            table = parquet.read_row_group(group)
            if table.num_rows > remaining:
                table = table.slice(table.num_rows - remaining)
            parts.append(table)
            remaining -= table.num_rows
        if remaining <= 0:
            break
    if not parts:
        return (schema or pa.schema([])).empty_table()
    parts.reverse()
    return pa.concat_tables(parts, promote_options="default")
