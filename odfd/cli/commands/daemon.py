"""``odfd daemon``: run the node (server, mirrors, audits, resources) in the foreground until
SIGTERM/SIGINT; ``odfd daemon reload|stop|audit DATASET`` talk to a running one."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from odfd.app.node import view_node
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.daemon.admin_client import AdminClient
from storage.layout import WorkspaceLayout

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "daemon",
        help="run the node: serve datasets, sync mirrors, audit, reconcile resources",
        description="Without an action, runs the daemon in the foreground (SIGTERM/SIGINT stop it, "
        "SIGHUP reloads config.toml). Actions talk to the daemon running on the workspace.",
    )
    parser.add_argument("--address", help="listen address (overrides [server] address)")
    parser.add_argument(
        "--port",
        "--http-port",  # kamu-cli's name (`kamu system api-server --http-port`)
        type=int,
        help="listen port (overrides [server] port; 0: any free port)",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_run)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    for name, help_text in (
        ("reload", "re-read config.toml and the mirror list"),
        ("stop", "stop the daemon (running work gets [daemon] shutdown_timeout)"),
    ):
        action = actions.add_parser(name, help=help_text)
        add_root_argument(action)
        action.set_defaults(func=_action, path=f"/{name}")
    audit = actions.add_parser(
        "audit", help="audit a dataset now (the report is stored; see odfd status)"
    )
    audit.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    audit.add_argument(
        "--integrity", action="store_true", help="integrity layers only (default: all layers)"
    )
    add_root_argument(audit)
    audit.set_defaults(func=_action, path=None)


def _run(args: argparse.Namespace) -> int:
    from odfd.daemon.service import run_daemon  # the daemon's imports are only paid by the daemon

    async def run(node: Node) -> None:
        await run_daemon(node, port=args.port, address=args.address, reconfigure=node.reconfigured)

    run_in_node(args, run)
    return 0


def _action(args: argparse.Namespace) -> int:
    async def run() -> int:
        layout = WorkspaceLayout(
            args.root if args.root is not None else WorkspaceLayout.default_root()
        )
        configured = (
            view_node(args.root).config.daemon.admin_socket
            if layout.config_path.is_file()
            else None
        )
        client = await AdminClient.require(layout, configured)
        if args.path is None:
            scope = "integrity" if args.integrity else "full"
            answer = await client.request("POST", f"/audit/{args.dataset}", scope=scope)
        else:
            answer = await client.request("POST", args.path)
        print(json.dumps(answer, indent=2), file=sys.stderr)
        return 0

    return asyncio.run(run())
