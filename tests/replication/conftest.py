"""Two nodes on loopback: workspaces in temporary folders and a real aiohttp server per node."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from odfd.config import ServerConfig
from odfd.server.app import RunningServer, running
from storage.workspace import Workspace

PUSH_TOKEN = "s3cret-push-token"

ServeFactory = Callable[[Workspace], Awaitable[RunningServer]]


@pytest.fixture
async def node_a(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.init(tmp_path / "node-a") as workspace:
        yield workspace


@pytest.fixture
async def node_b(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.init(tmp_path / "node-b") as workspace:
        yield workspace


@pytest.fixture
async def serve() -> AsyncIterator[ServeFactory]:
    """Starts a server on a free loopback port for a workspace; all are stopped at the end."""
    contexts = []

    async def start(workspace: Workspace, **overrides: object) -> RunningServer:
        config = ServerConfig(address="127.0.0.1", port=0, push_tokens=frozenset({PUSH_TOKEN}))
        for key, value in overrides.items():
            object.__setattr__(config, key, value)
        context = running(workspace, config)
        contexts.append(context)
        return await context.__aenter__()

    yield start
    for context in reversed(contexts):
        await context.__aexit__(None, None, None)
