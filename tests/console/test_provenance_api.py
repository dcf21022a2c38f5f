"""The console's row detail: ``GET /ui/api/datasets/NAME/provenance?offset=N`` gives the same
checked answer as ``odfd provenance``, to read and admin tokens only, and one line for bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from odfd.config import ServerConfig
from odfd.server.app import running
from storage.workspace import Workspace
from tests.console.pipelines import console_of
from tests.verifier.provenance_pipelines import build

READ = "read-token"


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    root = tmp_path / "ws"
    await build(root, "datafusion", ["grouped", "top"])
    config = ServerConfig(address="127.0.0.1", port=0, read_tokens=frozenset({READ}))
    async with (
        await Workspace.open(root) as workspace,
        running(workspace, config, mounts=[console_of(workspace)]) as server,
        aiohttp.ClientSession() as http,
    ):
        yield server.url + "ui/api/datasets/", http


async def _get(console: tuple[str, aiohttp.ClientSession], path: str, token: str | None):
    base, http = console
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.get(base + path, headers=headers) as response:
        return response.status, await response.json()


async def test_row_detail_traces_to_the_ingests(console) -> None:
    status, body = await _get(console, "top/provenance?offset=0", READ)
    assert status == 200, body
    assert body["checkedByReExecution"] is True
    row = body["row"]
    assert (row["dataset"], row["offset"], row["checked"]) == ("top", 0, True)
    assert row["columns"]["leader"] == "grouped.symbol"
    (grouped,) = row["inputs"]
    assert grouped["dataset"] == "grouped" and grouped["values"]["symbol"] == "A"
    leaves = {(w["dataset"], w["offset"]) for w in grouped["inputs"]}
    assert leaves == {("trades", 0), ("trades", 2), ("trades", 4), ("trades", 5)}
    assert grouped["inputs"][0]["ingest"]["source"] == "push source 'upload'"

    status, body = await _get(console, "top/provenance?offset=0&depth=1", READ)
    assert status == 200 and body["row"]["inputs"][0]["traced"] is False


async def test_row_detail_needs_a_token_and_says_what_is_wrong(console) -> None:
    status, body = await _get(console, "top/provenance?offset=0", None)
    assert status == 401 and "needs a bearer token" in body["error"]
    status, body = await _get(console, "trades/provenance?offset=0", READ)
    assert status == 400 and body["error"].startswith("trades is a root dataset")
    status, body = await _get(console, "top/provenance?offset=5", READ)
    assert status == 400 and body["error"] == "top has no row at offset 5 (its rows run 0..1)"
    status, body = await _get(console, "top/provenance", READ)
    assert status == 400 and body["error"] == "query parameter offset is required"
