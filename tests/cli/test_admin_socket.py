"""The admin socket asks the one authorization decision: its peer is the node's own OS user
(``SO_PEERCRED``) or sends a node admin's token; what it writes is recorded as that subject."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from odfd import __version__
from odfd.app.accounts import add_account, create_token
from odfd.app.forwarding import PROTOCOL, RUN_PATH, relevant_env
from odfd.app.node import Node, open_node
from odfd.app.sql import SqlRequest
from odfd.app.write_log import local_actor, record_write
from odfd.config import NodeConfig
from odfd.daemon import admin_auth, commands
from odfd.daemon.admin import AdminApi, AdminTarget
from odfd.daemon.commands import CommandRunner
from storage.catalog.write_log import WriteLogTable

LIST_TOKEN = "a-list-admin-token"


@dataclass
class _Daemon:
    """What the admin API drives of a daemon, for the routes this test calls (``/ping`` and the
    forwarded commands' ``/run``)."""

    node: Node
    config: NodeConfig
    commands: CommandRunner

    @property
    def workspace(self) -> Any:
        return self.node.workspace


@dataclass
class Socket:
    path: Path
    node: Node
    tokens: dict[str, str]

    async def call(
        self, method: str, path: str, who: str | None = None, body: Any = None
    ) -> tuple[int, str]:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens.get(who, who)}"}
        connector = aiohttp.UnixConnector(path=str(self.path))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.request(
                method, f"http://odfd{path}", headers=headers, json=body
            ) as response:
                return response.status, await response.text()

    async def run(self, who: str | None) -> None:
        """A forwarded command, as ``odfd.cli.via_daemon`` sends one."""
        request = SqlRequest(("SELECT 1",), "datafusion", "json")
        body = {
            "protocol": PROTOCOL,
            "version": __version__,
            "command": request.command,
            "request": request.to_json(),
            "root": str(self.node.root),
            "env": relevant_env(os.environ),
            "job": "j1",
        }
        status, text = await self.call("POST", RUN_PATH, who, body)
        assert status == 200 and '"frame": "result"' in text, text


@pytest.fixture
async def socket(empty_root: Path, tmp_path: Path) -> AsyncIterator[Socket]:
    node = await open_node(empty_root)
    await add_account(node, "ops", password=None, is_admin=True)
    await add_account(node, "alice", password=None)
    tokens = {name: (await create_token(node, name)).secret for name in ("ops", "alice")}
    tokens["list"] = LIST_TOKEN
    config = replace(
        node.config, server=replace(node.config.server, admin_tokens=frozenset({LIST_TOKEN}))
    )
    commands = CommandRunner(lambda: node)
    commands.ready = True
    daemon = cast(AdminTarget, _Daemon(node, config, commands))
    path = tmp_path / "admin.sock"
    runner: web.AppRunner = await AdminApi(daemon).start(path)
    try:
        yield Socket(path, node, tokens)
    finally:
        await commands.close(5)
        await runner.cleanup()
        await node.close()


async def test_the_nodes_own_user_needs_no_token(socket: Socket) -> None:
    assert (await socket.call("GET", "/ping"))[0] == 200


async def test_another_user_needs_a_node_admins_token(
    socket: Socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_auth, "daemon_uid", lambda: os.getuid() + 1)
    status, text = await socket.call("GET", "/ping")
    assert status == 401 and "node admin's bearer token" in text and "sent none" in text
    assert (await socket.call("GET", "/ping", "odfd_made-up"))[0] == 401
    status, text = await socket.call("GET", "/ping", "alice")
    assert status == 403 and "alice is neither" in text
    assert (await socket.call("GET", "/ping", "ops"))[0] == 200
    assert (await socket.call("GET", "/ping", "list"))[0] == 200  # [server] admin_tokens


async def test_writes_through_the_socket_are_recorded_as_its_subject(
    socket: Socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forwarded command's writes take their actor from ``local_actor()``, as every use case
    does (ingest, pull, …); this one records a write and nothing else."""

    async def writes(node: Node, request: Any, sink: Any) -> None:
        await record_write(node.workspace, local_actor(), "compact", "cities")

    monkeypatch.setitem(commands.USE_CASES, "sql", (SqlRequest, writes))
    await socket.run(None)
    monkeypatch.setattr(admin_auth, "daemon_uid", lambda: os.getuid() + 1)
    await socket.run("ops")
    writes_logged = await WriteLogTable(socket.node.workspace.catalog).of_target("cities")
    assert [(w.account, w.via) for w in writes_logged if w.action == "compact"] == [
        (local_actor().account, local_actor().via),  # the node's user: admin, cli:<user>
        ("ops", f"admin-socket:uid {os.getuid()}"),
    ]
