"""``odfd status``: the node at a glance — datasets with their heads, last sync, lag behind
their source and last audit; mirrors and their schedule; the daemon's queues when it runs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from odfd.app.status import build_status, compose_status, read_status_rows_now
from odfd.cli.status_text import render_status
from odfd.cli.workspace_args import add_root_argument, read_in_node, run_in_node
from odfd.daemon.admin_client import AdminClient, socket_path

if TYPE_CHECKING:
    from odfd.app.node import Node, NodeView
    from storage.catalog.sync_reader import SyncCatalogReader


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status", help="datasets, mirrors, syncs and audits of this node"
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="default: text"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    status = read_in_node(args, _without_daemon)
    if status is None:  # a daemon's socket (it reports its queues too), or the workspace path

        async def run(node: Node) -> int:
            client = await AdminClient.connect(node.layout, node.config.daemon.admin_socket)
            status = (
                await client.request("GET", "/status")
                if client
                else await build_status(node.workspace, freeze_after=node.config.sync.freeze_after)
            )
            _print(args, status)
            return 0

        return run_in_node(args, run)
    _print(args, status)
    return 0


def _without_daemon(catalog: SyncCatalogReader, node: NodeView) -> dict[str, Any] | None:
    """The status read without an event loop, unless a daemon's socket is there to ask."""
    if socket_path(node.layout, node.config.daemon.admin_socket).exists():
        return None
    return compose_status(read_status_rows_now(catalog, node.layout), node.config.sync.freeze_after)


def _print(args: argparse.Namespace, status: dict[str, Any]) -> None:
    print(json.dumps(status, indent=2) if args.output == "json" else render_status(status))
