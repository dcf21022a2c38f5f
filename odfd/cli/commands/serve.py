"""``odfd serve``: serve the workspace's datasets over HTTP (Simple and Smart Transfer
Protocols, signed object URLs, a JSON listing at ``/``, the query API at ``/query``, the web
console at ``/ui``) until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from odfd.app.failures import describe_os_error
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.errors import OdfdError

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="serve this node's datasets over HTTP")
    parser.add_argument(
        "--address", help="address to listen on (default: [server] address, else 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        "--http-port",  # kamu-cli's name (`kamu system api-server --http-port`)
        type=int,
        help="port to listen on (default: [server] port, else 8080; 0: any)",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    async def run(node: Node) -> None:
        import logging

        from odfd.cli.served_mounts import workspace_mounts
        from odfd.server.app import running

        config = node.config.server
        if args.address is not None:
            config = replace(config, address=args.address)
        if args.port is not None:
            config = replace(config, port=args.port)
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        try:
            async with running(node.workspace, config, mounts=workspace_mounts(node)) as server:
                print(
                    f"serving {len(await node.workspace.list_datasets())} dataset(s) at "
                    f"{server.url} (console: {server.url}ui/)",
                    flush=True,
                )
                await asyncio.Event().wait()
        except OSError as err:
            if err.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
                raise
            reason = (
                f"{os.strerror(err.errno)} (ports below 1024 need privileges; pick another --port)"
                if err.errno == errno.EACCES
                else describe_os_error(OSError(err.errno, os.strerror(err.errno)))
            )
            raise ServeError(f"cannot listen on {config.address}:{config.port}: {reason}") from None

    run_in_node(args, run)
    return 0


class ServeError(OdfdError):
    """The server cannot listen where it was asked to."""
