"""Serving resolves dataset names on a read-only catalog connection of its own, so a read never
waits behind a catalog transaction another task holds open (a daemon's syncs), and still sees
every committed change."""

from __future__ import annotations

import asyncio

import aiohttp

from storage.workspace import Workspace
from tests.replication.conftest import ServeFactory
from tests.replication.datagen import create_root


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


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
