"""Where OData is served from: behind a proxy its documents name ``[server] base_url``, not the
address the request reached; and a server without the query API (which OData reads through)
says so instead of failing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import aiohttp

from odfd.app.node import Node
from odfd.config import NodeConfig
from odfd.server.app import running
from odfd.server.query_api import query_api_mount
from storage.workspace import Workspace
from tests.server.odata_node import SERVER, add_datasets


async def test_base_url_behind_a_proxy(tmp_path: Path) -> None:
    config = dataclasses.replace(SERVER, base_url="https://data.example.org/node/")
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await add_datasets(workspace)
        node = Node(workspace, NodeConfig(server=config))
        async with running(workspace, config, mounts=[query_api_mount(node)]) as server:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{server.url}odata/foo.bar?$top=1") as response:
                    body = await response.text()
                async with session.get(f"{server.url}odata/alice") as response:
                    service = await response.text()
    assert 'xml:base="https://data.example.org/node/odata/"' in body
    assert "<id>https://data.example.org/node/odata/foo.bar(0)</id>" in body
    assert 'xml:base="https://data.example.org/node/odata/alice"' in service


async def test_without_the_query_api(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await add_datasets(workspace)
        async with running(workspace, SERVER) as server:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{server.url}odata/foo.bar") as response:
                    status, body = response.status, await response.text()
                async with session.get(f"{server.url}foo.bar/refs/head") as response:
                    transfer = response.status
    assert status == 404
    assert "query API" in body and "<m:error" in body  # OData's error document
    assert transfer == 200  # the transfer protocols beside it are unchanged
