"""``odfd access DATASET``: who can read, write, maintain and administer a dataset, and why."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "access", help="who can read, write, maintain and administer a dataset, and why"
    )
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    add_root_argument(parser)
    parser.set_defaults(func=_access)


def _access(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.access import access_report
        from odfd.app.authorization import Action

        report = await access_report(node, args.dataset)
        print(f"Access to {report.alias}:")
        width = max(len(row.who) for row in report.rows)
        header = "  ".join(a.value.upper() for a in Action)
        print(f"{'WHO'.ljust(width)}  {header}  WHY")
        for row in report.rows:
            cells = "  ".join(
                ("yes" if a in row.allowed else "no").ljust(len(a.value)) for a in Action
            )
            print(f"{row.who.ljust(width)}  {cells}  {row.reason}")
        return 0

    return run_in_node(args, run)
