"""``odfd ui``: open the web console. With a daemon running it points at the daemon's console;
otherwise it serves the workspace on loopback until interrupted, with a one-time token (in the
URL's fragment, which the browser never sends to a server) that unlocks the SQL box."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import webbrowser
from dataclasses import replace
from typing import TYPE_CHECKING

from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ui", help="open the web console of this node")
    parser.add_argument(
        "--port",
        "--http-port",  # kamu-cli's name (`kamu ui --http-port`)
        type=int,
        default=0,
        help="port to listen on (default: any)",
    )
    parser.add_argument(
        "--no-browser", action="store_true", help="print the console's URL, do not open it"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_ui)


def _open(url: str, args: argparse.Namespace) -> None:
    print(f"console: {url}", flush=True)
    if not args.no_browser:
        webbrowser.open(url)


def _ui(args: argparse.Namespace) -> int:
    async def run(node: Node) -> None:
        from odfd.cli.served_mounts import workspace_mounts
        from odfd.daemon.admin_client import AdminClient
        from odfd.server.app import running

        client = await AdminClient.connect(node.layout, node.config.daemon.admin_socket)
        if client is not None:
            status = await client.request("GET", "/status")
            _open(f"{status['daemon']['serverUrl']}ui/", args)
            return
        token = secrets.token_urlsafe(24)
        server = node.config.server
        config = replace(
            server,
            address="127.0.0.1",
            port=args.port,
            read_tokens=server.read_tokens | {token},
        )
        async with running(node.workspace, config, mounts=workspace_mounts(node)) as served:
            _open(f"{served.url}ui/#token={token}", args)
            print("serving the console until interrupted (Ctrl-C)", flush=True)
            await asyncio.Event().wait()

    try:
        run_in_node(args, run)
    except KeyboardInterrupt:
        pass
    return 0
