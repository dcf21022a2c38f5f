"""Serving resolves dataset names on a read-only catalog connection of its own, so a read never
waits behind a catalog transaction another task holds open (a daemon's syncs), and still sees
every committed change."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlencode

import aiohttp

from odfd.server.state import STATE_KEY
from protocol.identity import DatasetAliasPattern, Multihash
from storage.catalog.reader import CatalogReader
from storage.workspace import Workspace
from tests.replication.conftest import ServeFactory
from tests.replication.datagen import create_root


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def _status(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        await response.read()
        return response.status


async def test_refs_head_is_served_while_a_catalog_transaction_is_open(
    node_a: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1, checkpoints=False)
    head = await writer.dataset.chain.head()
    assert head is not None
    server = await serve(node_a)
    held, release = asyncio.Event(), asyncio.Event()

    async def hold_transaction() -> None:
        async with node_a.catalog.transaction():
            await node_a.catalog.sql.execute("UPDATE datasets SET updated_at = updated_at")
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold_transaction())
    try:
        await held.wait()
        # On the shared connection this request would wait until the transaction ends.
        async with asyncio.timeout(5):
            status, body = await _get(f"{server.url}cities/refs/head")
        assert (status, body) == (200, head.to_multibase())
        assert not holder.done()
    finally:
        release.set()
        await holder

    await node_a.rename_dataset("cities", "towns")
    assert (await _get(f"{server.url}towns/refs/head")) == (200, head.to_multibase())
    assert (await _get(f"{server.url}cities/refs/head"))[0] == 404


async def test_a_busy_catalog_is_waited_for_in_a_worker_thread(
    node_a: Workspace, tmp_path: Path
) -> None:
    await create_root(node_a, "cities", slices=1, checkpoints=False)
    # A copy of the catalog in rollback-journal mode, where a writer's exclusive lock makes
    # readers "busy" (under WAL that takes another process recovering the log).
    copy = tmp_path / "copy.sqlite"
    with sqlite3.connect(node_a.catalog.path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    lock = sqlite3.connect(copy, isolation_level=None)
    lock.execute("PRAGMA journal_mode = DELETE")
    reader = await CatalogReader.open(copy)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        lookup = asyncio.create_task(reader.find_by_alias("cities"))
        await asyncio.sleep(0.5)
        assert not lookup.done()  # waiting in a worker thread; the loop runs on meanwhile
        lock.execute("COMMIT")
        record = await asyncio.wait_for(lookup, 15)
        assert record is not None and record.alias == "cities"
    finally:
        lock.close()
        await reader.close()


async def test_a_lookup_that_found_nothing_holds_only_until_the_next_commit(
    node_a: Workspace,
) -> None:
    reader = await CatalogReader.open(node_a.catalog.path)
    try:
        assert await reader.find_by_alias("cities") is None
        assert await reader.find_by_alias("cities") is None  # the kept answer
        await create_root(node_a, "cities", slices=1, checkpoints=False)
        record = await reader.find_by_alias("cities")
        assert record is not None and record.alias == "cities"
    finally:
        await reader.close()


async def test_download_gets_see_every_change_at_once(
    node_a: Workspace, serve: ServeFactory
) -> None:
    """Download GETs keep a path's dataset and its opened folder while the catalog is
    unchanged (``ServerState.find``, ``open_dataset``): a new head, a rename, a dataset made
    private, withheld or deleted is still seen by the very next GET."""
    writer = await create_root(node_a, "cities", slices=1, checkpoints=False)
    server = await serve(node_a)
    state = server.runner.app[STATE_KEY]
    record = await node_a.resolve("cities")
    data_dir = node_a.layout.dataset(record.id).root / "data"
    (first,) = [path.name for path in data_dir.iterdir()]

    def signed(path: str, name: str) -> str:
        file = data_dir / name
        query, _ = state.signer.sign(
            "GET", str(record.id), "data", Multihash.from_multibase(name), file.stat().st_size
        )
        return f"{server.url}{path}/data/{name}?{urlencode(query)}"

    for _ in range(2):  # the second GET is answered from what the first kept
        assert await _status(f"{server.url}cities/data/{first}") == 200
        assert await _status(signed("cities", first)) == 200

    await writer.append(slices=1, rows=10, checkpoints=False)  # a new head and data file
    (second,) = [path.name for path in data_dir.iterdir() if path.name != first]
    assert await _status(f"{server.url}cities/data/{second}") == 200

    await node_a.rename_dataset("cities", "towns")
    assert await _status(f"{server.url}cities/data/{first}") == 404
    assert await _status(signed("cities", first)) == 404
    assert await _status(f"{server.url}towns/data/{first}") == 200
    assert await _status(signed("towns", second)) == 200

    config = state.config
    private = replace(config, private=(DatasetAliasPattern.parse("towns"),))
    state.settings = lambda: private  # as a daemon's reload of its settings does
    assert await _status(f"{server.url}towns/data/{first}") == 404
    assert await _status(signed("towns", first)) == 200  # the signed URL is the grant
    state.settings = lambda: config
    assert await _status(f"{server.url}towns/data/{first}") == 200

    state.withheld.add(record.id)
    assert await _status(f"{server.url}towns/data/{first}") == 403
    assert await _status(signed("towns", first)) == 403
    state.withheld.discard(record.id)

    url = signed("towns", first)
    await node_a.delete_dataset("towns")
    assert await _status(f"{server.url}towns/data/{first}") == 404
    assert await _status(url) == 404
