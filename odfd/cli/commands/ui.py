"""``odfd ui``: open the web console. With a daemon running it points at the daemon's console;
otherwise it serves the workspace on loopback until interrupted, with a one-time token (in the
URL's fragment, which the browser never sends to a server) that unlocks the SQL box."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import webbrowser
from dataclasses import replace

from odfd.cli.workspace_args import add_root_argument
from odfd.config import load_config
from odfd.daemon.admin_client import AdminClient
from odfd.server.app import running


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("ui", help="open the web console of this node")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
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
    async def run() -> None:
        from odfd.node_storage import open_workspace

        async with await open_workspace(args.root) as workspace:
            client = await AdminClient.connect(workspace.layout)
            if client is not None:
                status = await client.request("GET", "/status")
                _open(f"{status['daemon']['serverUrl']}ui/", args)
                return
            token = secrets.token_urlsafe(24)
            server = load_config(workspace.layout.config_path).server
            config = replace(
                server,
                address="127.0.0.1",
                port=args.port,
                read_tokens=server.read_tokens | {token},
            )
            async with running(workspace, config) as served:
                _open(f"{served.url}ui/#token={token}", args)
                print("serving the console until interrupted (Ctrl-C)", flush=True)
                await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0
