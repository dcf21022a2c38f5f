"""A daemon's reload reaches the settings its servers apply at each request: the query API's and
Flight SQL's result cap, time limit, private datasets and tokens, the upload limit; a changed
``flight_sql_port`` moves the Flight SQL listener (or says, in one line, why it could not).
The clients are real (aiohttp, ``kamu.connect``) and run against the daemon's own servers.

The tests are synchronous, each daemon in an ``asyncio.run`` of its own, outside the daemon
tests' loop check: they are about what a reload changes, and a heavy query past its time limit
holds the loop up now and then (DataFusion's thread contending for the GIL on a loaded machine),
which that check would report as this test's failure."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kamu
import pytest

# Imported here, at collection: the daemon's first query imports them on its event loop (a
# pre-existing first-query stall of ~1 s the loop check would report); these tests are about
# what a reload changes.
import odfd.app.answers
import odfd.app.live_queries  # noqa: F401
import verifier.engine.datafusion.session  # noqa: F401
from odfd.app.node import Node
from odfd.config import load_config
from odfd.daemon.service import Daemon
from storage.workspace import Workspace
from tests.verifier.builders import root_with_slices

READER = "reload-reader"
HEAVY = "select count(*) as n from range(0, 1000000000000)"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _flight_query(url: str, sql: str, token: str | None = None) -> list[Any]:
    with kamu.connect(url, token=token) as con:
        frame = con.query(sql)
        return list(frame[frame.columns[0]])


@dataclass
class Running:
    daemon: Daemon
    http: aiohttp.ClientSession
    base_config: str

    async def reload(self, server: str) -> dict[str, Any]:
        path = self.daemon.workspace.layout.config_path
        path.write_text(f"{self.base_config}[server]\n{server}")
        return await self.daemon.reload()

    async def query(self, sql: str, limit: int, token: str | None = None) -> tuple[int, Any]:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        assert self.daemon.server_url is not None
        async with self.http.get(
            f"{self.daemon.server_url}query",
            params={"query": sql, "limit": str(limit)},
            headers=headers,
        ) as response:
            return response.status, await response.json()

    async def flight(self, sql: str, token: str | None = None) -> list[Any]:
        assert self.daemon.flight_sql is not None
        return await asyncio.to_thread(_flight_query, self.daemon.flight_sql.url, sql, token)


def _with_daemon(root: Path, steps: Callable[[Running], Awaitable[None]]) -> None:
    async def run() -> None:
        async with await Workspace.init(root) as workspace, _running(workspace) as running:
            await steps(running)

    asyncio.run(run())


@asynccontextmanager
async def _running(workspace: Workspace) -> AsyncIterator[Running]:
    """A daemon on ``workspace`` serving Flight SQL."""
    await root_with_slices(workspace, "nums", [[1, 2, 3]])
    path = workspace.layout.config_path
    base = path.read_text() + "[daemon]\nspark_connect = false\n"
    path.write_text(f"{base}[server]\nflight_sql_port = {_free_port()}\n")
    daemon = Daemon(
        Node(workspace, load_config(path)),
        server_overrides={"address": "127.0.0.1", "port": 0},
    )
    await daemon.start()
    try:
        async with aiohttp.ClientSession() as http:
            yield Running(daemon, http, base)
    finally:
        await daemon.shutdown()


def test_reload_reaches_the_query_api_and_flight_sql(tmp_path: Path) -> None:
    _with_daemon(tmp_path / "ws", _reaches_the_query_api_and_flight_sql)


async def _reaches_the_query_api_and_flight_sql(running: Running) -> None:
    nums = "select value from nums order by value"
    assert (await running.query(nums, 3))[0] == 200
    assert await running.flight("select sum(value) as total from nums") == [6]
    assert running.daemon.flight_sql is not None
    old_port = running.daemon.flight_sql.port

    new_port = _free_port()
    answer = await running.reload(
        f'flight_sql_port = {new_port}\nquery_max_rows = 2\nquery_timeout = "0.5s"\n'
        f'private = ["nums"]\nread_tokens = ["{READER}"]\n'
    )
    assert answer["needsRestart"] == []
    assert answer["flightSql"] == f"Flight SQL now serves on grpc://127.0.0.1:{new_port}"
    assert not _listening(old_port)

    # the query API: private now, its cap 2 rows, its time limit 0.5 s
    status, body = await running.query(nums, 2)
    assert status == 400 and "not found" in body["message"], body
    status, body = await running.query(nums, 3, READER)
    assert status == 400 and "cap of 2 rows" in body["message"], body
    status, body = await running.query(nums, 2, READER)
    assert status == 200, body
    status, body = await running.query(HEAVY, 1, READER)
    assert status == 400 and "time limit of 0.5 s" in body["message"], body

    # Flight SQL on its new port: the same private dataset, token and time limit
    with pytest.raises(Exception, match="not found"):
        await running.flight(nums)
    assert await running.flight("select sum(value) as total from nums", READER) == [6]
    with pytest.raises(Exception, match="time limit of 0.5 s"):
        await running.flight(HEAVY, READER)


def test_flight_sql_listener_moves_or_says_why_not(tmp_path: Path) -> None:
    _with_daemon(tmp_path / "ws", _moves_or_says_why_not)


async def _moves_or_says_why_not(running: Running) -> None:
    assert running.daemon.flight_sql is not None
    port = running.daemon.flight_sql.port
    answer = await running.reload("")
    assert answer["flightSql"] == "Flight SQL is off"
    assert running.daemon.flight_sql is None and not _listening(port)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        answer = await running.reload(f"flight_sql_port = {busy}\n")
        assert answer["flightSql"].startswith(
            f"Flight SQL stays off: cannot listen on 127.0.0.1:{busy} for Flight SQL"
        )
        assert running.daemon.flight_sql is None

    answer = await running.reload("url_ttl_seconds = 60\n")  # the URL signer's: at a restart
    assert answer["needsRestart"] == ["server.url_ttl_seconds"]
    assert "flightSql" not in answer


def test_reload_reaches_the_upload_limit(tmp_path: Path) -> None:
    _with_daemon(tmp_path / "ws", _reaches_the_upload_limit)


async def _reaches_the_upload_limit(running: Running) -> None:
    url = f"{running.daemon.server_url}platform/file/upload/prepare"
    params = {"fileName": "data.csv", "contentLength": "100"}
    auth = {"Authorization": "Bearer pusher"}
    await running.reload('push_tokens = ["pusher"]\n')
    async with running.http.post(url, params=params, headers=auth) as response:
        assert response.status == 200
    await running.reload('push_tokens = ["pusher"]\nupload_max_bytes = 10\n')
    async with running.http.post(url, params=params, headers=auth) as response:
        assert response.status == 400
        assert (await response.json())["message"].startswith("Content too large")
