"""``odfd init``: create a node workspace."""

from __future__ import annotations

import argparse
import asyncio

from odfd.cli.workspace_args import add_root_argument
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init", help="create a workspace (config, catalog, datasets folder)"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_init)


def _init(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with await Workspace.init(args.root) as workspace:
            print(f"Initialized an odfd workspace in {workspace.root}")
        return 0

    return asyncio.run(run())
