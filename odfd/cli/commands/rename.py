"""``odfd rename``: give a dataset a new alias (its id and chain do not change)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("rename", help="rename a dataset")
    parser.add_argument("dataset", help="dataset alias or id")
    parser.add_argument("new_name", help="new alias")
    add_root_argument(parser)
    parser.set_defaults(func=_rename)


def _rename(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.datasets import rename_dataset

        record = await rename_dataset(node, args.dataset, args.new_name)
        terminal.info(f"Renamed: {args.dataset} -> {record.alias}")
        return 0

    return run_in_node(args, run)
