"""``odfd status``: the node at a glance — datasets with their heads, last sync, lag behind
their source and last audit; mirrors and their schedule; the daemon's queues when it runs."""

from __future__ import annotations

import argparse
import json

from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.daemon.admin_client import AdminClient
from odfd.daemon.status import build_status, render_status
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status", help="datasets, mirrors, syncs and audits of this node"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_root_argument(parser)
    parser.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        client = await AdminClient.connect(workspace.layout)
        status = await client.request("GET", "/status") if client else await build_status(workspace)
        print(json.dumps(status, indent=2) if args.output == "json" else render_status(status))
        return 0

    return run_in_workspace(args, run)
