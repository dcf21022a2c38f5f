"""``odfd init``: create a node workspace."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument

if TYPE_CHECKING:
    from odfd.app.events import Event


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
    from odfd.app import workspace_init

    if args.exists_ok:
        existing = workspace_init.existing_workspace(args.root)
        if existing is not None:
            terminal.info(f"An odfd workspace exists already in {existing}")
            return 0
    workspace_init.check_not_nested(args.root)
    admin = asyncio.run(workspace_init.init_workspace(args.root, _Printer()))
    print(
        f"Its administrator account is {admin.name} ({admin.id}); set its password with "
        f"`odfd account passwd {admin.name}`"
    )
    return 0


class _Printer:
    def emit(self, event: Event) -> None:
        from odfd.app.workspace_init import WorkspaceCreated

        if isinstance(event, WorkspaceCreated):
            print(f"Initialized an odfd workspace in {event.root}")
            print(f"Its identity key signs answers to queries as {event.identity}")
