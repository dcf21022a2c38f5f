"""``odfd system``: workspace maintenance. ``gc`` removes what interrupted runs left behind."""

from __future__ import annotations

import argparse
import sys

from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from storage.gc import collect_garbage
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("system", help="workspace maintenance (gc)")
    commands = parser.add_subparsers(dest="system_command", metavar="SUBCOMMAND", required=True)
    register_gc(commands)


def register_gc(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "gc",
        help="remove temporary files of interrupted runs (staging folders, partial first "
        "pulls) and settle dataset folders missing from the catalog",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_gc)


def _gc(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        report = await collect_garbage(workspace)
        for path in report.removed:
            print(f"Removed: {path}", file=sys.stderr)
        for action in report.orphans:
            print(f"Recovered: {action.describe()}", file=sys.stderr)
        if not report.removed and not report.orphans:
            print("Nothing to clean up", file=sys.stderr)
        return 0

    return run_in_workspace(args, run)
