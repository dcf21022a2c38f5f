"""``odfd sql server``: serve the workspace's datasets over Arrow Flight SQL until interrupted.

The shape of ``kamu sql server``: tables are the datasets by alias in DataFusion's dialect, as in
``odfd sql``; ``kamu.connect("grpc://HOST:PORT")``, the ADBC Flight SQL driver, pandas and JDBC
tools connect to it. Tokens and private datasets are the ``[server]`` table's.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.workspace_args import run_in_node
from odfd.errors import OdfdError

if TYPE_CHECKING:
    from odfd.app.node import Node

WORD = "server"
"""``odfd sql server``: the word that turns ``odfd sql`` into this command."""

DEFAULT_PORT = 50050
"""The reference's Flight SQL port."""


DESCRIPTION = (
    "Serves the workspace's datasets over Arrow Flight SQL until interrupted (Ctrl-C): tables "
    'are the datasets by alias ("a/b"), in DataFusion\'s dialect; kamu.connect("grpc://HOST:PORT"), '
    "ADBC and JDBC tools connect to it. Tokens and private datasets are the [server] table's."
)


def help_parser() -> argparse.ArgumentParser:
    """The parser whose help ``odfd sql server --help`` prints: the server's own options, not
    the query options of ``odfd sql`` (which parses both, ``server`` being its QUERY word)."""
    from odfd.cli import global_options
    from odfd.cli.workspace_args import add_root_argument

    parser = argparse.ArgumentParser(prog=f"odfd sql {WORD}", description=DESCRIPTION)
    add_arguments(parser)
    add_root_argument(parser)
    global_options.add_to(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        help="(sql server) address to listen on (default: [server] address, else 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        type=int,
        help="(sql server) port to listen on (default: [server] flight_sql_port, else "
        f"{DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument(
        "--livy",
        action="store_true",
        help="(sql server) kamu-cli's Spark Livy server, which odfd does not serve: refused, "
        "saying what to connect to instead",
    )


class SqlServerArgumentError(OdfdError):
    """``odfd sql server`` was given options of a query."""

    exit_code = 2  # an argument error, as argparse's own


def run(args: argparse.Namespace, *, default_engine: str) -> int:
    """Serves until interrupted; ``default_engine`` is ``odfd sql``'s, the one served."""
    given = [
        option
        for option, value in (
            ("-c", args.command),
            ("--script", args.script),
            ("--as-of", args.as_of),
        )
        if value is not None
    ]
    if args.livy:
        raise SqlServerArgumentError(
            f"`odfd sql {WORD}` serves no Livy (kamu's --livy, for kamu.connect(URL, "
            'engine="spark")): it serves Arrow Flight SQL in DataFusion\'s dialect; connect with '
            'kamu.connect("grpc://HOST:PORT") (engine "datafusion", the default)'
        )
    if given or args.engine != default_engine:
        raise SqlServerArgumentError(
            f"`odfd sql {WORD}` serves every dataset in {default_engine}; it takes no "
            f"{', '.join(given) or '--engine ' + args.engine}"
        )

    _quiet_grpc()

    async def serve(node: Node) -> int:
        import asyncio
        import signal

        from odfd.flight_sql import workspace_queries

        config = node.config.server
        port = args.port if args.port is not None else config.flight_sql_port
        running = await workspace_queries.serve(
            node,
            address=args.address or config.address,
            port=DEFAULT_PORT if port is None else port,
        )
        terminal.info(f"Flight SQL server listening on {running.url}; Ctrl-C stops it")
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopped.set)
        try:
            await stopped.wait()
        finally:
            await running.stop()
        return 0

    return run_in_node(args, serve)


GRPC_VERBOSITY = "GRPC_VERBOSITY"
"""gRPC's own logging switch, read when gRPC starts (the server's first use of it)."""


def _quiet_grpc() -> None:
    """Keeps gRPC's own log lines (e.g. a failed bind's ``E0000 … add_port.cc`` and its absl
    preamble, printed before odfd's one-line error says the same) off the terminal, unless
    ``-v`` or the user's own ``GRPC_VERBOSITY`` asks for them."""
    import os

    if not terminal.is_verbose():
        os.environ.setdefault(GRPC_VERBOSITY, "NONE")
