"""Building and running the server: ``create_app`` for embedding (the daemon, tests) and
``running`` for a server in the caller's event loop (``odfd serve``, ``odfd ui``).

What else the node serves (the web console at ``/ui``) is mounted by the caller: the server
knows the transfer protocols only, and nothing above it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from odfd.config import ServerConfig
from odfd.server import signed_head, simple
from odfd.server.errors import errors_as_json
from odfd.server.smart_pull import handle_pull
from odfd.server.smart_push import handle_push
from odfd.server.state import STATE_KEY, ServerState, authorize
from storage.workspace import Workspace

MAX_REQUEST_BYTES = 1 << 20
"""Request bodies outside uploads (which stream) are small."""

Mount = Callable[[web.Application], None]
"""Adds routes of a layer above the server to its app (``odfd.console.api.console_mount``)."""


def create_app(
    workspace: Workspace,
    config: ServerConfig,
    *,
    mounts: Sequence[Mount] = (),
    settings: Callable[[], ServerConfig] | None = None,
) -> web.Application:
    """The transfer protocols (Simple and Smart), ``refs/head.sig`` and the listing, OData and
    GraphQL over the query API (when a mount adds it), plus what ``mounts`` add. ``settings`` gives the
    current settings at each request (a daemon's, which a reload changes); default: ``config``."""
    app = web.Application(
        client_max_size=MAX_REQUEST_BYTES, middlewares=[errors_as_json, authorize]
    )
    app[STATE_KEY] = ServerState.create(workspace, config, settings)
    app.cleanup_ctx.append(_catalog_reader)
    for mount in mounts:
        mount(app)
    signed_head.add_routes(app)
    simple.add_routes(app)
    app.router.add_get(f"/{simple.DATASET}/pull", handle_pull, allow_head=False)
    app.router.add_get(f"/{simple.DATASET}/push", handle_push, allow_head=False)
    from odfd.server import graphql, odata  # read through the query API, when a mount adds it

    odata.add_routes(app)
    graphql.add_routes(app)
    return app


async def _catalog_reader(app: web.Application) -> AsyncIterator[None]:
    """Serving resolves names on a read-only connection of its own (``ServedDatasets.reading``)."""
    async with app[STATE_KEY].datasets.reading():
        yield


@dataclass(frozen=True, slots=True)
class RunningServer:
    url: str
    runner: web.AppRunner


@asynccontextmanager
async def running(
    workspace: Workspace, config: ServerConfig, *, mounts: Sequence[Mount] = ()
) -> AsyncIterator[RunningServer]:
    """Serve in this event loop until the block exits (port 0 picks a free port)."""
    app = create_app(workspace, config, mounts=mounts)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, config.address, config.port)
    await site.start()
    port = runner.addresses[0][1] if runner.addresses else config.port
    host = f"[{config.address}]" if ":" in config.address else config.address
    try:
        yield RunningServer(f"http://{host}:{port}/", runner)
    finally:
        await runner.cleanup()
