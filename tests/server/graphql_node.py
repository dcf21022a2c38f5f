"""A node for the GraphQL tests: the OData tests' datasets (``foo.bar``, ``alice/weather``,
``alice/empty`` and the private ``secret.nums``) served by the real server on loopback with the
query API mounted, as ``odfd serve`` serves them, on a thread of its own. The server records the
method and path of every request it answers, so a test can tell which route a client used."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from odfd.app.node import Node
from odfd.config import NodeConfig
from odfd.server.app import Mount, create_app
from odfd.server.query_api import query_api_mount
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.server.odata_node import READ_TOKEN, SERVER, add_datasets

__all__ = ["READ_TOKEN", "Served", "send", "serve"]

SEARCH_QUERY = """
{
  search {
    query(query: "{query}", perPage: 100) {
      nodes {
        ... on Dataset {
          id
          name
          owner {
            accountName
          }
          kind
          metadata {
            chain {
              blocks(page: 0, perPage: 1) {
                totalCount
              }
            }
          }
          data {
            numRecordsTotal
            estimatedSizeBytes
          }
        }
      }
    }
  }
}
"""
"""kamu-cli's remote search query, as its ``SearchServiceRemoteImpl`` sends it (the search text
put in place of ``{query}``)."""


@dataclass
class Served:
    url: str
    root: Path
    node: Node
    requests: list[tuple[str, str]] = field(default_factory=list)
    """``(method, path)`` of every request answered, in order."""

    def post(self, query: str, token: str | None = None, **fields: Any) -> tuple[int, Any]:
        return self.raw(json.dumps({"query": query, **fields}).encode(), token)

    def raw(self, body: bytes, token: str | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(f"{self.url}/graphql", data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        return send(request)

    def get(self, path: str) -> tuple[int, Any]:
        return send(urllib.request.Request(f"{self.url}{path}"))


def send(request: urllib.request.Request) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def serve(
    root: Path,
    *,
    query_api: bool = True,
    add: Callable[[Workspace], Awaitable[None]] = add_datasets,
) -> Iterator[Served]:
    """The node until the generator is closed; without ``query_api``, a server that serves
    the transfer protocols and the listing only (as a node without GraphQL); ``add`` puts the
    datasets in (the OData tests' by default)."""

    async def run_node(publish: Publish[Served], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            await add(workspace)
            node = Node(workspace, NodeConfig(server=SERVER))
            mounts: list[Mount] = [query_api_mount(node)] if query_api else []
            app = create_app(workspace, SERVER, mounts=mounts)
            seen: list[tuple[str, str]] = []

            async def record(request: web.Request, _response: web.StreamResponse) -> None:
                seen.append((request.method, request.path))

            app.on_response_prepare.append(record)
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            try:
                publish(Served(f"http://127.0.0.1:{port}", root, node, seen))
                await stop.wait()
            finally:
                await runner.cleanup()

    with serve_in_thread("graphql-node", run_node) as served:
        yield served
