"""Two nodes on loopback: workspaces in temporary folders and a real aiohttp server per node."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from odfd.config import ServerConfig
from odfd.server.app import RunningServer, running
from storage.workspace import Workspace
from tests.fixtures.seaweedfs import SeaweedServer
from tests.replication.s3_pair import S3Pair, s3_node

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
async def s3_pair(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> AsyncIterator[S3Pair]:
    """Nodes ``a`` (source) and ``b`` (target) of the S3 server, and ``cities`` in a fresh
    bucket."""
    async with (
        await s3_node(tmp_path / "a", s3_server) as source,
        await s3_node(tmp_path / "b", s3_server) as target,
    ):
        yield S3Pair(s3_server, s3_server.url(s3_bucket, "cities"), source, target)


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
