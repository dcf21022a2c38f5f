"""One node for the query API's HTTP tests: the datasets of ``datasets.py`` served in this process
by the real server (transfer protocols, query API, ingest and the resource protocol, as ``odfd serve`` mounts them) on
loopback, on a thread of its own running the node's event loop. Its identity key is the
reference's test key, so its signatures can be compared with the reference's."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from odfd.app.node import Node
from odfd.app.resource_service import reconcile_here
from odfd.config import NodeConfig, ServerConfig
from odfd.server.app import Mount, running
from odfd.server.ingest_api import IngestApi
from odfd.server.query_api import query_api_mount
from odfd.server.resource_api import ResourceApi
from odfd.server.upload_api import UploadApi
from protocol.identity import DatasetAliasPattern
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.query_api.datasets import PRIVATE, TEST_KEY_SEED, add_all

READ_TOKEN = "query-api-reader"
PUSH_TOKEN = "query-api-pusher"
ADMIN_TOKEN = "query-api-admin"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Served:
    url: str
    root: Path
    loop: asyncio.AbstractEventLoop
    node: Node

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        raw: bytes | None = None,
    ) -> Reply:
        """A request as curl makes it; the reply's body parsed if it is JSON."""
        return call(self.url, method, path, body, token=token, raw=raw)

    def run(self, work: Any) -> Any:
        """Run a coroutine on the node's loop (to change its datasets)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(60)


def call(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = None,
    raw: bytes | None = None,
) -> Reply:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, content, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        status, content, headers = error.code, error.read(), dict(error.headers)
    if headers.get("Content-Type", "").startswith("application/json"):
        return Reply(status, json.loads(content), headers)
    return Reply(status, content.decode(errors="replace"), headers)


def install_test_key(workspace: Workspace) -> None:
    path = workspace.keys.node_key_path
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, TEST_KEY_SEED)
    finally:
        os.close(fd)


HEAVY_QUERY_SECONDS = 2.0
"""The test server's query time limit: long enough for any real test query."""

SERVER = ServerConfig(
    port=0,
    query_timeout=HEAVY_QUERY_SECONDS,
    private=(DatasetAliasPattern.parse(PRIVATE),),
    read_tokens=frozenset({READ_TOKEN}),
    push_tokens=frozenset({PUSH_TOKEN}),
    admin_tokens=frozenset({ADMIN_TOKEN}),
)


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("query-api") / "ws"

    async def serve(publish: Publish[Served], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            install_test_key(workspace)
            await add_all(workspace)
            node = Node(workspace, NodeConfig(server=SERVER))
            mounts: list[Mount] = [
                query_api_mount(node),
                IngestApi(lambda: node),
                UploadApi(lambda: node),
                ResourceApi(lambda: node, reconcile_here(node)),
            ]
            async with running(workspace, SERVER, mounts=mounts) as server:
                publish(Served(server.url, root, asyncio.get_running_loop(), node))
                await stop.wait()

    with serve_in_thread("query-api-node", serve) as served:
        yield served
