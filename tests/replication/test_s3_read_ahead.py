"""S3 pulls read blocks ahead of the walk (``odfd.sync.block_read_ahead``) and still check every
block: a tampered block is refused, junk block keys the chain never reaches are dropped, each
block is fetched once, and an incremental pull fetches only the new blocks. The read-ahead's
bounds, cancellation and error rules are checked directly on in-memory blocks."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from odfd.sync.block_read_ahead import START_AFTER, BlockReadAhead
from odfd.sync.errors import CorruptSourceError
from protocol.identity import Multihash
from storage.layout import object_name
from storage.stores.s3 import S3ObjectStore
from storage.workspace import Workspace
from tests.replication.datagen import DatasetWriter, create_root
from tests.replication.s3_pair import S3Pair


def _junk_hash(seed: bytes) -> Multihash:
    return Multihash.from_digest_sha3_256(hashlib.sha3_256(seed).digest())


@pytest.fixture
def block_gets(monkeypatch: pytest.MonkeyPatch) -> Counter[Multihash]:
    """Every block GET an S3 object store makes, by hash."""
    gets: Counter[Multihash] = Counter()
    original = S3ObjectStore.get_bytes

    async def counted(self: S3ObjectStore, hash: Multihash) -> bytes:
        if self.folder.endswith("blocks/"):
            gets[hash] += 1
        return await original(self, hash)

    monkeypatch.setattr(S3ObjectStore, "get_bytes", counted)
    return gets


async def _pushed_root(pair: S3Pair) -> DatasetWriter:
    """A root deep enough (33 blocks) for the walk to take blocks from the read-ahead, pushed."""
    writer = await pair.create_root(slices=3, empty_blocks=30)
    await pair.push()
    return writer


async def test_a_tampered_block_is_refused_with_read_ahead(s3_pair: S3Pair) -> None:
    writer = await _pushed_root(s3_pair)
    # Deep enough that the walk takes it from the read-ahead.
    victim = [hash async for hash, _ in writer.dataset.chain.iter_blocks()][-3]
    bucket = s3_pair.bucket()
    await bucket.put(bucket.location.key(f"blocks/{object_name(victim)}"), b"not a block")
    with pytest.raises(CorruptSourceError, match=f"block {victim} has bytes that hash to"):
        await s3_pair.pull()
    assert await s3_pair.target.list_datasets() == []
    assert not any(s3_pair.target.layout.datasets_dir.iterdir())


async def test_junk_block_keys_are_dropped_and_pulls_fetch_each_new_block_once(
    s3_pair: S3Pair, block_gets: Counter[Multihash]
) -> None:
    writer = await _pushed_root(s3_pair)
    bucket = s3_pair.bucket()
    junk = [_junk_hash(b"junk-%d" % i) for i in range(3)]
    for hash in junk:  # named like blocks, but no block links to them
        await bucket.put(bucket.location.key(f"blocks/{object_name(hash)}"), b"junk")
    await bucket.put(bucket.location.key("blocks/not-a-hash"), b"junk")
    chain = [hash async for hash, _ in writer.dataset.chain.iter_blocks()]
    block_gets.clear()  # the pushes read the bucket's blocks too
    target = s3_pair.target

    first = await s3_pair.pull()
    assert first.num_blocks == len(chain) > START_AFTER
    copy = await target.get_dataset("cities")
    assert copy.id is not None
    stored = {p.name for p in target.layout.dataset(copy.id).blocks_dir.iterdir()}
    assert stored == {object_name(hash) for hash in chain}
    assert {hash: block_gets[hash] for hash in chain} == dict.fromkeys(chain, 1)
    assert set(block_gets) <= {*chain, *junk}

    await writer.append(slices=2, empty_blocks=20)
    await s3_pair.push()
    new = [hash async for hash, _ in writer.dataset.chain.iter_blocks(stop_at=chain[0])]
    block_gets.clear()
    second = await s3_pair.pull()
    assert second.num_blocks == len(new) > START_AFTER
    # Only the new blocks came over (the junk, never walked, is still not held locally).
    assert set(block_gets) <= {*new, *junk}
    assert {hash: block_gets[hash] for hash in new} == dict.fromkeys(new, 1)
    stored = {p.name for p in target.layout.dataset(copy.id).blocks_dir.iterdir()}
    assert stored == {object_name(hash) for hash in [*new, *chain]}


def _blocks(n: int) -> dict[Multihash, bytes]:
    return {_junk_hash(b"%d" % i): b"%d" % i * 100 for i in range(n)}


async def test_the_read_ahead_is_bounded_never_fetches_twice_and_drops_unasked_errors() -> None:
    blocks = _blocks(200)
    order = sorted(blocks)
    broken = order[5]  # read ahead, failing, but never asked for
    gets: Counter[Multihash] = Counter()
    running = 0
    most_running = 0

    async def listing() -> AsyncIterator[Multihash]:
        for hash in order:
            yield hash

    async def fetch(hash: Multihash) -> bytes:
        nonlocal running, most_running
        gets[hash] += 1
        running += 1
        most_running = max(most_running, running)
        try:
            await asyncio.sleep(0.001)
        finally:
            running -= 1
        if hash == broken:
            raise OSError("the server hung up")
        return blocks[hash]

    async def held_locally(hash: Multihash) -> bool:
        return hash == order[0]

    wanted = order[100:0:-1]
    wanted.remove(broken)
    async with BlockReadAhead(
        listing, fetch, held_locally, in_flight=8, max_bytes=2000, start_after=2
    ) as ahead:
        for hash in wanted:
            assert await ahead.get(hash) == blocks[hash]
        assert ahead.read_ahead > 0
        lister = ahead._lister
        pending = list(ahead._ahead.values())
    assert lister is not None and lister.done()
    assert all(task.done() for task in pending)
    assert most_running <= 8 + 1  # the read-ahead's GETs and the walk's own
    assert order[0] not in gets
    assert max(gets.values()) == 1
    with pytest.raises(OSError, match="hung up"):  # asked for, it fails as without read-ahead
        async with BlockReadAhead(listing, fetch, held_locally, start_after=0) as ahead:
            await ahead.get(order[1])
            await asyncio.sleep(0.05)
            await ahead.get(broken)


async def test_a_long_walk_lists_once_the_head_arrives_a_short_one_after_start_after(
    tmp_path: Path,
) -> None:
    """The head's sequence number, against the local head's, says whether the walk is long; a
    head that cannot be read that way (junk) leaves the count of blocks asked to decide."""
    async with await Workspace.init(tmp_path / "a") as workspace:
        writer = await create_root(workspace, "long", slices=1, empty_blocks=START_AFTER + 4)
        chain = writer.dataset.chain
        hashes = [hash async for hash, _ in chain.iter_blocks()]  # newest first
        blocks = {hash: await chain.get_block_bytes(hash) for hash in hashes}
    head, head_sequence = hashes[0], len(hashes) - 1
    junk = _junk_hash(b"junk head")
    blocks[junk] = b"not a block"
    listed: list[Multihash] = []

    async def listing() -> AsyncIterator[Multihash]:
        for hash in hashes:
            listed.append(hash)
            yield hash

    async def fetch(hash: Multihash) -> bytes:
        return blocks[hash]

    async def held_locally(hash: Multihash) -> bool:
        return False

    cases = [
        (head, -1, True),  # nothing local: the whole chain to walk
        (head, head_sequence - START_AFTER - 1, True),
        (head, head_sequence - START_AFTER, False),  # START_AFTER blocks to go: a short walk
        (head, None, False),  # the local head unknown
        (junk, -1, False),
    ]
    for first, local_sequence, lists in cases:
        listed.clear()
        async with BlockReadAhead(
            listing, fetch, held_locally, local_sequence=local_sequence
        ) as ahead:
            assert await ahead.get(first) == blocks[first]
            await asyncio.sleep(0.05)
            assert bool(listed) is lists, (first, local_sequence)
            for hash in hashes[1 : START_AFTER + 1]:  # a walk of START_AFTER + 1 blocks lists
                assert await ahead.get(hash) == blocks[hash]
            await asyncio.sleep(0.05)
            assert listed
