"""``odfd tail``: the last records of a dataset (read straight from its newest slices, no Spark)."""

from __future__ import annotations

import argparse

import pyarrow as pa
import pyarrow.parquet as pq

from odfd.cli.data_output import FORMATS, write_result
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.coordinator.query import AsOf, dataset_view, resolve_as_of
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tail", help="show the last records of a dataset")
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "-n", "--num-records", type=int, default=10, metavar="N", help="how many (default 10)"
    )
    parser.add_argument(
        "--output", "-o", choices=FORMATS[:-1], default="table", help="output format"
    )
    parser.add_argument(
        "--as-of", metavar="BLOCK|TIME", help="show the dataset as of a block hash or time"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_tail)


def _tail(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        dataset = await workspace.get_dataset(args.dataset)
        block = time = None
        if args.as_of:
            block, time = await resolve_as_of(workspace, AsOf.parse(args.as_of))
        view = await dataset_view(dataset, pinned_block=block, pinned_time=time)
        write_result(
            last_records(view.paths, view.schema, max(args.num_records, 0)), args.output, None
        )
        return 0

    return run_in_workspace(args, run)


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
