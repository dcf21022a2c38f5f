"""A walk's block stash writes verified blocks in the background: the walk goes on while a batch
is written (what arrives meanwhile waits for the next write), and a write that fails fails the
walk at its next step, naming the error."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from odfd.sync.walk import BlockStash
from protocol.identity import Multihash
from storage.errors import StorageError
from storage.stores.localfs import LocalFsObjectStore

BATCH = 512  # odfd.sync.walk._STASH_BATCH


class GatedStore(LocalFsObjectStore):
    """A real local block store whose batch writes wait for ``gate`` (a slow disk), or fail
    with ``failure`` (a full one); it records each batch's size."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = asyncio.Event()
        self.failure: StorageError | None = None
        self.batches: list[int] = []

    async def put_many_read_back(
        self, items: Sequence[bytes]
    ) -> tuple[list[Multihash], set[Multihash]]:
        self.batches.append(len(items))
        await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return await super().put_many_read_back(items)


def _blocks(count: int, start: int = 0) -> list[tuple[Multihash, bytes]]:
    items = [f"block {n}".encode() * 8 for n in range(start, start + count)]
    return [(Multihash.from_digest_sha3_256(data), data) for data in items]


async def test_the_walk_goes_on_while_a_batch_is_written(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "blocks")
    stash = BlockStash(store)
    first, later = _blocks(BATCH), _blocks(BATCH + 88, start=BATCH)

    async def add_all(items: list[tuple[Multihash, bytes]]) -> None:
        for hash, data in items:
            await stash.add(hash, data)

    await asyncio.wait_for(add_all(first), 5)
    assert store.batches == [BATCH]  # written in the background, the gate still closed
    await asyncio.wait_for(add_all(later), 5)  # would hang if the walk waited for the write
    assert store.batches == [BATCH]  # the rest waits for the write in flight
    assert await stash.local_bytes(first[3][0]) == first[3][1]  # in flight: still found
    store.gate.set()
    await stash.flush()
    assert store.batches == [BATCH, BATCH + 88]
    stored = {hash async for hash in store.iter_hashes()}
    assert stored == {hash for hash, _ in first + later} == set(stash.added)


async def test_a_failed_background_write_fails_the_walk(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "blocks")
    store.failure = StorageError(f"{tmp_path}: no space left on the device")
    stash = BlockStash(store)
    for hash, data in _blocks(BATCH):
        await stash.add(hash, data)
    store.gate.set()
    await asyncio.sleep(0)
    with pytest.raises(StorageError, match="no space left"):
        await stash.flush()
    assert {hash async for hash in store.iter_hashes()} == set()
    await stash.discard_added()
    assert stash.added == []


async def test_a_stash_into_an_empty_store_writes_its_blocks_at_once(tmp_path: Path) -> None:
    """A first pull's blocks wait for ``flush``: the empty folder then takes them in one batch
    (one rename of a staged folder, not one per block after a first small batch)."""
    store = GatedStore(tmp_path / "blocks")
    store.gate.set()
    stash = BlockStash(store)
    await stash.list_held()
    items = _blocks(3 * BATCH)
    for hash, data in items:
        await stash.add(hash, data)
    await asyncio.sleep(0)  # a write started would have begun
    assert store.batches == []
    assert await stash.local_bytes(items[5][0]) == items[5][1]  # waiting: still found
    await stash.flush()
    assert store.batches == [3 * BATCH]
    stored = {hash async for hash in store.iter_hashes()}
    assert stored == {hash for hash, _ in items} == set(stash.added)


async def test_a_stash_into_a_store_holding_blocks_writes_in_batches(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "blocks")
    store.gate.set()
    held = _blocks(1, start=10_000)
    await store.put_bytes(held[0][1])
    stash = BlockStash(store)
    await stash.list_held()
    for hash, data in _blocks(BATCH):
        await stash.add(hash, data)
    await asyncio.sleep(0)
    assert store.batches == [BATCH]  # an interrupted pull's stash: written as before
    await stash.flush()
