"""``odfd tail``: the last records of a dataset (read straight from its newest slices, no Spark)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.result_formats import FORMATS, check_output_args, write_result
from odfd.app.tail import tail
from odfd.cli.arguments import non_negative_int, positive_int
from odfd.cli.output import add_output_format
from odfd.cli.workspace_args import add_root_argument, run_in_node

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
        records = await tail(
            node, args.dataset, records=args.num_records, skip=args.skip_records, as_of=args.as_of
        )
        write_result(records, args.output, args.output_path)
        return 0

    return run_in_node(args, run)
