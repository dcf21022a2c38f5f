"""``odfd init``: create a node workspace."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument
from storage.errors import WorkspaceError
from storage.keys import did_of
from storage.layout import DEFAULT_WORKSPACE_DIR, WORKSPACE_ENV, WorkspaceLayout
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "init", help="create a workspace (config, catalog, datasets folder)"
    )
    parser.add_argument(
        "--exists-ok",
        action="store_true",
        help="succeed without changing anything when a workspace is already there",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_init)


def _init(args: argparse.Namespace) -> int:
    existing = args.root if args.root is not None else WorkspaceLayout.default_root()
    if args.exists_ok and (existing / "config.toml").is_file():
        terminal.info(f"An odfd workspace exists already in {existing}")
        return 0
    if args.root is None and not os.environ.get(WORKSPACE_ENV):
        enclosing = WorkspaceLayout.enclosing(Path.cwd())
        if enclosing is not None and enclosing != Path.cwd().absolute() / DEFAULT_WORKSPACE_DIR:
            raise WorkspaceError(
                f"{Path.cwd()} is inside the odfd workspace {enclosing}, which odfd commands "
                "use from here; pass --root DIR to create a separate one"
            )

    async def run() -> int:
        from odfd.app.accounts import add_admin_account

        async with await Workspace.init(args.root) as workspace:
            identity = did_of(workspace.keys.node_key())
            print(f"Initialized an odfd workspace in {workspace.root}")
            print(f"Its identity key signs answers to queries as {identity}")
            admin = await add_admin_account(workspace)
            print(
                f"Its administrator account is {admin.name} ({admin.id}); set its password with "
                f"`odfd account passwd {admin.name}`"
            )
        return 0

    return asyncio.run(run())
