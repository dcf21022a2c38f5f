"""Run as ``python -m tests.query_api.loop_probe ROOT`` (a fresh interpreter, so the first query
really is the process's first): a server with the query API over one dataset, watched by the
daemon tests' ``LoopBlockingCheck`` while it answers its first query, a query stopped at its
time limit, two such queries at once beside a transfer request, and a query after them. Prints
one JSON object: the statuses, whether DataFusion was loaded before the server started, and
every step that held the event loop for more than 100 ms."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp

from odfd.app.node import Node
from odfd.config import NodeConfig, ServerConfig
from odfd.server.app import running
from odfd.server.query_api import query_api_mount
from storage.workspace import Workspace
from tests.daemon.loop_check import LoopBlockingCheck
from tests.verifier.builders import root_with_slices

ALIAS = "probe.values"
TIME_LIMIT = 1.0
FIRST = f'SELECT sum(value) AS total FROM "{ALIAS}"'
HEAVY = "SELECT sum(value) AS s FROM generate_series(1, 100000000000)"


async def probe(root: Path) -> dict[str, object]:
    async with await Workspace.init(root) as workspace:
        await root_with_slices(workspace, ALIAS, [[1, 2, 3], [4]])
        preloaded = "datafusion" in sys.modules
        config = ServerConfig(port=0, query_timeout=TIME_LIMIT)
        node = Node(workspace, NodeConfig(server=config))
        loop = asyncio.get_running_loop()
        with LoopBlockingCheck(loop) as check:
            async with running(workspace, config, mounts=[query_api_mount(node)]) as server:
                async with aiohttp.ClientSession(server.url) as client:

                    async def ask(sql: str) -> tuple[int, object]:
                        async with client.post("/query", json={"query": sql}) as response:
                            return response.status, await response.json()

                    async def head() -> int:
                        async with client.get(f"/{ALIAS}/refs/head") as response:
                            await response.read()
                            return response.status

                    first = await ask(FIRST)
                    stopped = await ask(HEAVY)
                    together = await asyncio.gather(ask(HEAVY), ask(HEAVY), head())
                    after = await ask(FIRST)
    return {
        "preloaded": preloaded,
        "first": first,
        "stopped": stopped[0],
        "together": [together[0][0], together[1][0], together[2]],
        "after": after,
        "slow": check.slow,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe(Path(sys.argv[1])))))
