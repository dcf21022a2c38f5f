"""Building and running the server: ``create_app`` for embedding (the daemon, tests) and
``serve`` for ``odfd serve``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from odfd.console.api import add_console
from odfd.console.backend import NodeBackend, WorkspaceBackend
from odfd.server import signed_head, simple
from odfd.server.config import ServerConfig
from odfd.server.smart_pull import handle_pull
from odfd.server.smart_push import handle_push
from odfd.server.state import STATE_KEY, ServerState
from storage.catalog.reader import CatalogReader
from storage.workspace import Workspace

MAX_REQUEST_BYTES = 1 << 20
"""Request bodies outside uploads (which stream) are small."""


def create_app(
    workspace: Workspace, config: ServerConfig, *, console: NodeBackend | None = None
) -> web.Application:
    """``console``: what the web console at ``/ui`` shows (default: the workspace alone)."""
    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app[STATE_KEY] = ServerState.create(workspace, config)
    app.cleanup_ctx.append(_catalog_reader)
    add_console(app, console or WorkspaceBackend(workspace))
    signed_head.add_routes(app)
    simple.add_routes(app)
    app.router.add_get(f"/{simple.DATASET}/pull", handle_pull, allow_head=False)
    app.router.add_get(f"/{simple.DATASET}/push", handle_push, allow_head=False)
    return app


async def _catalog_reader(app: web.Application) -> AsyncIterator[None]:
    """Serving resolves names on a read-only connection of its own (``ServerState.reader``)."""
    state = app[STATE_KEY]
    reader = await CatalogReader.open(state.workspace.catalog.path)
    state.reader = reader
    try:
        yield
    finally:
        state.reader = None
        await reader.close()


@dataclass(frozen=True, slots=True)
class RunningServer:
    url: str
    runner: web.AppRunner


@asynccontextmanager
async def running(workspace: Workspace, config: ServerConfig) -> AsyncIterator[RunningServer]:
    """Serve in this event loop until the block exits (port 0 picks a free port)."""
    runner = web.AppRunner(create_app(workspace, config), access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, config.address, config.port)
    await site.start()
    port = runner.addresses[0][1] if runner.addresses else config.port
    host = f"[{config.address}]" if ":" in config.address else config.address
    try:
        yield RunningServer(f"http://{host}:{port}/", runner)
    finally:
        await runner.cleanup()


async def serve(
    workspace: Workspace, config: ServerConfig, *, ready: asyncio.Event | None = None
) -> None:
    """Serve until cancelled (Ctrl-C)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    async with running(workspace, config) as server:
        print(
            f"serving {len(await workspace.list_datasets())} dataset(s) at {server.url} "
            f"(console: {server.url}ui/)",
            flush=True,
        )
        if ready is not None:
            ready.set()
        await asyncio.Event().wait()
