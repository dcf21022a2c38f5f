"""``odfd delete``: remove datasets from the workspace."""

from __future__ import annotations

import argparse
import sys

from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("delete", help="delete datasets (folder, key and catalog entry)")
    parser.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset alias or id")
    add_root_argument(parser)
    parser.set_defaults(func=_delete)


def _delete(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        for ref in args.datasets:
            record = await workspace.delete_dataset(ref)
            print(f"Deleted: {record.alias} ({record.id})", file=sys.stderr)
        return 0

    return run_in_workspace(args, run)
