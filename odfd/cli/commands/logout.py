"""``odfd logout [URL]``: forget the token ``odfd login`` kept for a node (``--all``: every
one), in this workspace's store and the user's (``--global``: the user's only)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("logout", help="forget the access token kept for a remote node")
    parser.add_argument("url", nargs="?", metavar="URL", help="the node logged in to (or --all)")
    parser.add_argument("-a", "--all", action="store_true", help="forget every kept login")
    parser.add_argument(
        "--global", dest="user_scope", action="store_true", help="only the user's store"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_logout)


def _logout(args: argparse.Namespace) -> int:
    if (args.url is None) != args.all:
        raise SystemExit("odfd logout: give the node's URL, or --all")

    async def run(node: Node) -> int:
        from odfd.app.login_store import Scope
        from odfd.app.remote_login import log_out

        scope = Scope.USER if args.user_scope else None
        for gone in log_out(node, args.url, scope=scope):
            terminal.info(f"Logged out: {gone.account} at {gone.url} ({gone.scope.value} store)")
        return 0

    return run_in_node(args, run, check_storage=False)
