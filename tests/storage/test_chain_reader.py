"""The verified chain reader: every fault it reports, read back from a folder without an event
loop, from object stores (local files, memory) and from a remote-like source, and read forward.

Each scenario is a set of stored blocks (some broken on purpose) and the items a read must give:
every backend must give exactly those, down to the fault's fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from protocol.codec.flatbuffers import block_hash, encode_block, hash_block
from protocol.identity import Multihash
from protocol.model import MetadataBlock, SetInfo
from storage.chain.reader import (
    BlockPosition,
    BrokenLink,
    BrokenSequence,
    ChainBlock,
    ChainFault,
    ChainItem,
    HashMismatch,
    MalformedBlock,
    MissingBlock,
    check_block,
    check_hash,
    check_run,
    read_back,
    read_back_from_folder,
    read_back_list,
    read_forward,
)
from storage.errors import ObjectNotFoundError
from storage.layout import object_name
from storage.stores.localfs import LocalFsObjectStore
from storage.stores.memory import MemoryObjectStore
from tests.storage.chain_builder import ChainBuilder

GARBAGE = b"these bytes are not a metadata block"


@dataclass
class Stored:
    """Block files by name (a name may hold bytes that are not the block it names) and where a
    read starts."""

    files: dict[Multihash, bytes]
    head: Multihash
    hashes: list[Multihash] = field(default_factory=list)
    """The intact chain's blocks, oldest first."""


def chain(infos: int = 3) -> Stored:
    builder = ChainBuilder()
    for n in range(infos):
        builder.add(SetInfo(description=str(n)))
    files = {hash: encode_block(block) for hash, block in builder.blocks}
    return Stored(files, builder.head, [hash for hash, _ in builder.blocks])


def block_of(stored: Stored, hash: Multihash) -> ChainBlock:
    from protocol.codec.flatbuffers import decode_block

    data = stored.files[hash]
    return ChainBlock(hash, decode_block(data), data)


def put(stored: Stored, block: MetadataBlock) -> Multihash:
    hash, data = hash_block(block)
    stored.files[hash] = data
    return hash


def position(stored: Stored, hash: Multihash) -> BlockPosition:
    return block_of(stored, hash).position


# --- backends --------------------------------------------------------------------------------


class DictSource:
    """A remote's block fetcher: whatever bytes it holds under a name, unchecked."""

    def __init__(self, files: dict[Multihash, bytes]) -> None:
        self.files = files
        self.reads: list[Multihash] = []

    async def get_bytes(self, hash: Multihash) -> bytes:
        self.reads.append(hash)
        if hash not in self.files:
            raise ObjectNotFoundError("the remote", hash)
        return self.files[hash]


def write_folder(folder: Path, stored: Stored) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for hash, data in stored.files.items():
        (folder / object_name(hash)).write_bytes(data)
    return folder


async def read_all(
    backend: str, tmp_path: Path, stored: Stored, *, strict: bool = False
) -> list[ChainItem]:
    if backend == "folder":
        folder = write_folder(tmp_path / "blocks", stored)
        return list(read_back_from_folder(folder, stored.head, strict=strict))
    if backend == "localfs":
        store: object = LocalFsObjectStore(write_folder(tmp_path / "blocks", stored))
    elif backend == "memory":
        memory = MemoryObjectStore()
        for data in stored.files.values():
            await memory.put_bytes(data)  # a memory store only ever holds correctly named bytes
        store = memory
    else:
        store = DictSource(stored.files)
    return [item async for item in read_back(store, stored.head, strict=strict)]  # type: ignore[arg-type]  # every store is a BlockSource


def without_store(items: list[ChainItem]) -> list[object]:
    """Items to compare across backends: where a missing block was looked for differs."""
    return [
        dataclasses.replace(item, store="") if isinstance(item, MissingBlock) else item
        for item in items
    ]


BACKENDS = ["folder", "localfs", "memory", "remote"]
NAMED_RIGHT = ["folder", "localfs", "memory", "remote"]
"""Backends that can hold a scenario (a memory store refuses bytes under another's name)."""
ANY_NAMES = ["folder", "localfs", "remote"]


# --- scenarios -------------------------------------------------------------------------------


def intact() -> tuple[Stored, list[object]]:
    stored = chain()
    return stored, [block_of(stored, h) for h in reversed(stored.hashes)]


def head_missing() -> tuple[Stored, list[object]]:
    stored = chain()
    del stored.files[stored.head]
    return stored, [MissingBlock(stored.head, None, "")]


def parent_missing() -> tuple[Stored, list[object]]:
    stored = chain()
    h = stored.hashes
    expected: list[object] = [block_of(stored, h[3]), block_of(stored, h[2])]
    del stored.files[h[1]]
    return stored, [*expected, MissingBlock(h[1], position(stored, h[2]), "")]


def hash_mismatch() -> tuple[Stored, list[object]]:
    stored = chain()
    h = stored.hashes
    original = stored.files[h[2]]
    forged = original[:-1] + bytes([original[-1] ^ 1])
    stored.files[h[2]] = forged
    return stored, [
        block_of(stored, h[3]),
        HashMismatch(h[2], position(stored, h[3]), block_hash(forged), len(forged)),
    ]


def malformed() -> tuple[Stored, list[object]]:
    stored = chain(0)
    garbage = block_hash(GARBAGE)
    stored.files[garbage] = GARBAGE
    seed = block_of(stored, stored.head).block
    child = put(
        stored,
        dataclasses.replace(seed, prev_block_hash=garbage, sequence_number=1, event=SetInfo()),
    )
    stored.head = child
    reason = check_block(garbage, GARBAGE)
    assert isinstance(reason, MalformedBlock) and "malformed" in reason.reason
    return stored, [
        block_of(stored, child),
        MalformedBlock(garbage, position(stored, child), reason.reason),
    ]


def not_decreasing() -> tuple[Stored, list[object]]:
    """A parent numbered above its child: even a local read (lenient) stops there."""
    stored = chain(0)
    seed_block = block_of(stored, stored.head).block
    seed = put(stored, dataclasses.replace(seed_block, sequence_number=7))
    child = put(
        stored,
        dataclasses.replace(seed_block, prev_block_hash=seed, sequence_number=3, event=SetInfo()),
    )
    stored.head = child
    return stored, [
        block_of(stored, child),
        BrokenSequence(seed, position(stored, child), 7, None),
    ]


SCENARIOS: dict[str, tuple[Callable[[], tuple[Stored, list[object]]], list[str]]] = {
    "intact": (intact, NAMED_RIGHT),
    "head-missing": (head_missing, NAMED_RIGHT),
    "parent-missing": (parent_missing, NAMED_RIGHT),
    "hash-mismatch": (hash_mismatch, ANY_NAMES),
    "malformed": (malformed, NAMED_RIGHT),
    "not-decreasing": (not_decreasing, NAMED_RIGHT),
}


@pytest.mark.parametrize(
    ("scenario", "backend"),
    [(scenario, backend) for scenario, (_, backends) in SCENARIOS.items() for backend in backends],
)
async def test_every_backend_reads_the_same_blocks_and_faults(
    tmp_path: Path, scenario: str, backend: str
) -> None:
    stored, expected = SCENARIOS[scenario][0]()
    items = await read_all(backend, tmp_path, stored)
    assert without_store(items) == expected
    for item in items:
        if isinstance(item, ChainBlock):
            assert item.data == stored.files[item.hash]
    if isinstance(items[-1], MissingBlock):
        where = {"folder": str(tmp_path / "blocks"), "remote": "the remote"}.get(backend)
        assert where is None or items[-1].store == where


# --- strict reads: a remote's chain ------------------------------------------------------------


def gap() -> tuple[Stored, list[ChainFault]]:
    """Seed #0 under a child #2: a local read lets the rules report it, a strict one stops.
    Returns the fault of a strict read, then that of a lenient one (if any)."""
    stored = chain(0)
    seed = stored.head
    seed_block = block_of(stored, seed).block
    child = put(
        stored,
        dataclasses.replace(seed_block, prev_block_hash=seed, sequence_number=2, event=SetInfo()),
    )
    stored.head = child
    return stored, [BrokenSequence(seed, position(stored, child), 0, None)]


def zero_with_parent() -> tuple[Stored, list[ChainFault]]:
    stored = chain(1)
    first = block_of(stored, stored.head).block
    head = put(stored, dataclasses.replace(first, sequence_number=0))
    stored.head = head
    seed = first.prev_block_hash
    assert seed is not None
    return stored, [
        BrokenSequence(head, None, 0, seed),
        BrokenSequence(seed, BlockPosition(head, 0), 0, None),
    ]


def no_parent_above_zero() -> tuple[Stored, list[ChainFault]]:
    stored = chain(0)
    seed_block = block_of(stored, stored.head).block
    head = put(stored, dataclasses.replace(seed_block, sequence_number=1))
    stored.head = head
    return stored, [BrokenSequence(head, None, 1, None)]


STRICT = {"gap": gap, "zero-with-parent": zero_with_parent, "no-parent": no_parent_above_zero}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scenario", STRICT)
async def test_strict_reads_require_consecutive_numbers_down_to_zero(
    tmp_path: Path, scenario: str, backend: str
) -> None:
    stored, faults = STRICT[scenario]()
    strict = await read_all(backend, tmp_path / "strict", stored, strict=True)
    assert strict[-1] == faults[0]
    lenient = await read_all(backend, tmp_path / "lenient", stored)
    assert [item for item in lenient if isinstance(item, ChainFault)] == faults[1:]


def test_blocks_in_hand_must_follow_their_links() -> None:
    stored = chain()
    h = stored.hashes
    run = [(hash, stored.files[hash]) for hash in (h[3], h[1])]
    items = list(check_run(run))
    assert items == [block_of(stored, h[3]), BrokenLink(h[1], position(stored, h[3]), h[2])]
    intact_run = [(hash, stored.files[hash]) for hash in reversed(h)]
    assert list(check_run(intact_run, strict=True)) == [block_of(stored, x) for x in reversed(h)]
    after = list(check_run(intact_run[2:], after=block_of(stored, h[2])))
    assert after == [block_of(stored, x) for x in (h[1], h[0])]
    misnamed = [(h[3], stored.files[h[3]]), (h[2], stored.files[h[1]])]
    assert isinstance(list(check_run(misnamed))[-1], HashMismatch)
    # Bytes whose hash was checked already (a tarball's members) are only decoded and linked.
    hashed = list(check_run(misnamed, hashed=True))
    assert [(item.hash, item.block) for item in hashed] == [
        (h[3], block_of(stored, h[3]).block),
        (h[2], block_of(stored, h[1]).block),
    ]


def test_one_block_alone() -> None:
    stored = chain(0)
    data = stored.files[stored.head]
    assert check_block(stored.head, data) == block_of(stored, stored.head)
    other = block_hash(GARBAGE)
    assert check_block(other, data) == HashMismatch(other, None, stored.head, len(data))
    assert isinstance(check_block(other, GARBAGE), MalformedBlock)


def test_a_hash_check_alone_does_not_decode() -> None:
    stored = chain(0)
    data = stored.files[stored.head]
    assert check_hash(stored.head, data) is None
    assert check_hash(block_hash(GARBAGE), GARBAGE) is None  # named right, though no block
    child = BlockPosition(stored.head, 1)
    assert check_hash(stored.head, GARBAGE, child) == HashMismatch(
        stored.head, child, block_hash(GARBAGE), len(GARBAGE)
    )


# --- laziness, stretches and stops -------------------------------------------------------------


async def test_a_read_back_fetches_a_block_only_when_the_last_was_taken() -> None:
    stored = chain()
    source = DictSource(stored.files)
    items = read_back(source, stored.head)
    first = await anext(items)
    assert isinstance(first, ChainBlock) and source.reads == [stored.head]
    await items.aclose()
    h = stored.hashes
    stopped = [item async for item in read_back(DictSource(stored.files), h[3], stop_at=h[1])]
    assert stopped == [block_of(stored, h[3]), block_of(stored, h[2])]
    assert [item async for item in read_back(source, None)] == []


async def test_a_stretch_read_as_one_list() -> None:
    stored, expected = parent_missing()
    h = stored.hashes
    assert await read_back_list(DictSource(stored.files), h[3], h[2]) == [block_of(stored, h[3])]
    assert without_store([await read_back_list(DictSource(stored.files), h[3], None)]) == [  # type: ignore[list-item]  # a fault, not a list
        expected[-1]
    ]


# --- reading forward ---------------------------------------------------------------------------


@pytest.mark.parametrize("segment", [2, 1024])
async def test_forward_reads_oldest_first_in_bounded_stretches(segment: int) -> None:
    stored = chain(6)
    source = DictSource(stored.files)
    items = [item async for item in read_forward(source, stored.head, segment=segment)]
    assert items == [block_of(stored, h) for h in stored.hashes]
    after = [item async for item in read_forward(source, stored.head, after={stored.hashes[3]})]
    assert after == [block_of(stored, h) for h in stored.hashes[4:]]
    assert [item async for item in read_forward(source, None)] == []


@pytest.mark.parametrize("segment", [2, 1024])
async def test_forward_faults(segment: int) -> None:
    stored = chain(6)
    h = stored.hashes

    async def forward(files: dict[Multihash, bytes]) -> list[ChainItem]:
        return [
            item async for item in read_forward(DictSource(files), stored.head, segment=segment)
        ]

    missing = dict(stored.files)
    del missing[h[2]]
    assert without_store(await forward(missing)) == [
        MissingBlock(h[2], BlockPosition(h[3], None), "")
    ]
    forged = dict(stored.files)
    forged[h[4]] = forged[h[4]][:-1] + bytes([forged[h[4]][-1] ^ 1])
    *before, fault = await forward(forged)
    assert isinstance(fault, HashMismatch) and fault.hash == h[4]
    # A fault past the first pass comes after the stretches below it (none in one stretch).
    assert before == [block_of(stored, x) for x in h[: len(before)]] and len(before) < 4
    # The file named after block 2 holds a block linking "up" to block 3: 3 -> 2 -> 3 -> ...
    looping = dict(stored.files)
    block_2 = block_of(stored, h[2]).block
    looping[h[2]] = encode_block(dataclasses.replace(block_2, prev_block_hash=h[3]))
    (endless,) = await forward(looping)
    assert isinstance(endless, BrokenSequence) and endless.hash in (h[2], h[3])
    assert endless.counted_from == position(stored, stored.head)
