"""Walking a remote chain back to the last block both sides share, verifying every block.

Blocks are read through the verified chain reader (``storage.chain.reader``, strict): a block is
accepted only if its bytes hash to the name it was asked for and decode, and if it links exactly
to the block after it: ``prevBlockHash`` names the next block walked and sequence numbers drop by
one down to a seed at 0. The head's sequence number therefore bounds the walk: an endless or
cyclic chain cannot pass, and ``MAX_CHAIN_LENGTH`` bounds the head itself. A fault the reader
finds is reported as the remote's: ``CorruptSourceError``.

The fork point is found in the same pass: a cursor walks the local chain down in step with the
remote one, and the first remote block that equals the local block at the same sequence number
is the last shared block. Everything newer on the remote side is what a pull brings.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from odfd.sync.errors import ChainPoint, CorruptSourceError
from protocol.codec.flatbuffers import peek_prev_block_hash
from protocol.identity import DatasetId, Multihash
from protocol.model import MetadataBlock, Seed
from storage.chain import MetadataChain
from storage.chain.reader import (
    BrokenLink,
    BrokenSequence,
    ChainBlock,
    ChainFault,
    ChainItem,
    HashMismatch,
    MalformedBlock,
    MissingBlock,
    check_run,
    read_back,
)
from storage.errors import ObjectNotFoundError
from storage.stores.base import ObjectStore

MAX_CHAIN_LENGTH = 10_000_000
"""Longest remote chain a walk accepts by default (its head's sequence number + 1)."""
_STASH_BATCH = 512
_CHECK_RUN = 500
"""Blocks of a tarball checked between two looks at their objects (``match_linked_run``)."""
_STASH_MOST_BYTES = 64 << 20
"""Most bytes of verified blocks waiting while a write is in flight before the walk waits too."""


@dataclass(frozen=True, slots=True)
class VerifiedBlock:
    hash: Multihash
    block: MetadataBlock

    @property
    def point(self) -> ChainPoint:
        return ChainPoint(self.hash, self.block.sequence_number)


@dataclass(frozen=True, slots=True)
class WalkResult:
    new_blocks: list[VerifiedBlock]
    """Remote blocks after the shared one, oldest first."""
    common: ChainPoint | None
    """The newest block both chains hold (``None``: they share nothing)."""
    local: ChainPoint
    remote: ChainPoint

    @property
    def dataset_id(self) -> DatasetId | None:
        """The remote's dataset id when the walk reached its seed."""
        if self.new_blocks and isinstance(self.new_blocks[0].block.event, Seed):
            return self.new_blocks[0].block.event.dataset_id
        return None

    @property
    def up_to_date(self) -> bool:
        """Nothing to bring: the remote head is the local head or one of its ancestors."""
        return not self.new_blocks

    @property
    def diverged(self) -> bool:
        """The local side has blocks the remote lacks, and the remote has new ones."""
        local_ahead = self.local.hash is not None and (
            self.common is None or self.common.hash != self.local.hash
        )
        return bool(self.new_blocks) and local_ahead


def _corrupt(fault: ChainFault, where: str) -> CorruptSourceError:
    """What a remote chain's fault tells the user: the remote is not to be trusted."""
    child = fault.child
    match fault:
        case HashMismatch():
            problem = f"block {fault.hash} has bytes that hash to {fault.actual}"
        case MalformedBlock():
            problem = f"block {fault.hash} does not decode: {fault.reason}"
        case MissingBlock():
            linked = (
                "the head is"
                if child is None
                else f"block {child.hash} (#{child.sequence_number}) links to"
            )
            problem = (
                f"{linked} block {fault.hash}, which the remote does not serve: "
                "the chain does not link"
            )
        case BrokenLink() if child is not None:
            problem = (
                f"block {child.hash} links to {fault.named}, "
                f"but the block before it in the tarball is {fault.hash}"
            )
        case BrokenSequence() if (
            child is not None
            and child.sequence_number is not None
            and fault.sequence_number != child.sequence_number - 1
        ):
            problem = (
                f"block {fault.hash} has sequence number {fault.sequence_number} but block "
                f"{child.hash} (#{child.sequence_number}) links to it: the chain does not link"
            )
        case BrokenSequence():
            problem = f"block {fault.hash} (#{fault.sequence_number}) " + (
                "is first but has a prevBlockHash"
                if fault.sequence_number == 0
                else "has no prevBlockHash but is not block #0"
            )
        case _:
            problem = f"the chain does not link at block {fault.hash}"
    return CorruptSourceError(f"{where}: {problem}")


def _check_length(head: ChainBlock, where: str, max_blocks: int) -> None:
    """The head's sequence number bounds the walk; ``max_blocks`` bounds the head."""
    seq = head.block.sequence_number
    if seq < 0 or seq >= max_blocks:
        raise CorruptSourceError(
            f"{where}: head block {head.hash} has sequence number {seq}: a chain of "
            f"{seq + 1} blocks is over the limit of {max_blocks}"
        )


class LocalCursor:
    """Walks the local chain down to a requested sequence number, only ever backward."""

    def __init__(
        self, chain: MetadataChain | None, head: Multihash | None, head_seq: int | None
    ) -> None:
        self._chain = chain
        self._hash = head
        self._seq = head_seq if head is not None else None
        self.head = ChainPoint(head, head_seq if head is not None else None)

    async def hash_at(self, seq: int) -> Multihash | None:
        while self._seq is not None and self._hash is not None and self._seq > seq:
            assert self._chain is not None  # a head implies a chain
            self._hash = peek_prev_block_hash(await self._chain.get_block_bytes(self._hash))
            self._seq -= 1
        return self._hash if self._seq == seq else None


class BlockStash:
    """Stores verified remote blocks into the local block store as they arrive (batched), so an
    interrupted pull does not fetch them again; remembers which ones it added. Without a store
    (a push comparing histories) it keeps nothing."""

    def __init__(self, store: ObjectStore | None) -> None:
        self.store = store
        self.added: list[Multihash] = []
        # By hash: the walk looks up every block it reads here first (a list scan made a
        # 10,000-block pull ~2.5M comparisons).
        self._pending: dict[Multihash, bytes] = {}
        self._pending_bytes = 0
        self._writing: asyncio.Future[None] | None = None
        self._in_flight: dict[Multihash, bytes] = {}
        """The batch being written (a lookup finds it here until the write is done)."""
        self.read_back: set[Multihash] = set()
        """Added blocks whose stored files the store read back and found to hash to their names
        (a commit need not re-read them: ``MetadataChain.check_stored``)."""
        self._held: set[Multihash] | None = None
        """The store's blocks when ``list_held`` ran (``None``: not listed, each lookup asks)."""
        self._into_empty = False
        """``list_held`` found the store empty: blocks wait for ``flush`` (or for
        ``_STASH_MOST_BYTES``), so the store's empty folder takes them in one write."""

    async def list_held(self) -> None:
        """List the store's blocks once, for a walk into a dataset with no head (none held, or
        an interrupted pull's stash): its thousands of lookups then ask the store only for the
        blocks it holds, instead of a failing open each (~0.4 s of the loop for 10,000)."""
        if self.store is not None:
            self._held = {hash async for hash in self.store.iter_hashes()}
            self._into_empty = not self._held

    async def local_bytes(self, hash: Multihash) -> bytes | None:
        pending = self._pending.get(hash) or self._in_flight.get(hash)
        if pending is not None:
            return pending
        if self.store is None or (self._held is not None and hash not in self._held):
            return None
        try:
            return await self.store.get_bytes(hash)
        except ObjectNotFoundError:
            return None

    async def add(self, hash: Multihash, data: bytes) -> None:
        """Keep a verified block; every ``_STASH_BATCH`` blocks a write of all those waiting
        starts, and the walk goes on while it runs (under load a batch's ``syncfs`` took
        0.3-0.7 s: 20 of them waited for one by one were most of a 10,000-block walk)."""
        if self.store is None:
            return
        self._pending[hash] = data
        self._pending_bytes += len(data)
        if len(self._pending) < _STASH_BATCH:
            return
        if self._into_empty and self._pending_bytes < _STASH_MOST_BYTES:
            # An empty folder takes a whole batch in one rename (``batch_child``); once it holds
            # a batch, each later block is renamed on its own (9,500 of them: up to 0.8 s of the
            # last write of a pull over an IPFS export, whose walk outruns the first write).
            return
        self._into_empty = False
        if self._writing is None or self._writing.done():
            await self._written()
            self._start_write(self.store)
        elif self._pending_bytes >= _STASH_MOST_BYTES:
            await self._written()

    async def add_many(self, items: Sequence[tuple[Multihash, bytes]]) -> None:
        if self.store is None:
            return
        absent = set(await self.store.missing([hash for hash, _ in items]))
        for hash, data in items:
            if hash in absent:
                self._pending[hash] = data
        await self.flush()

    async def flush(self) -> None:
        """Store every block kept so far (a failed write's error is raised here or by ``add``)."""
        await self._written()
        if not self._pending or self.store is None:
            return
        self._start_write(self.store)
        await self._written()

    def _start_write(self, store: ObjectStore) -> None:
        batch, self._pending, self._pending_bytes = self._pending, {}, 0
        # Recorded before the write: a write that fails half-way may have stored some of them.
        self.added.extend(batch)
        self._in_flight = batch
        # A cancelled walk (its pull's downloads failed) leaves the write running in its
        # thread; ``settle`` waits for it before anything is kept or removed.
        self._writing = asyncio.ensure_future(self._put(store, list(batch.values())))

    async def _written(self) -> None:
        """Wait for the write in flight; its error, if any, is raised (once)."""
        writing = self._writing
        if writing is None:
            return
        try:
            await asyncio.shield(writing)
        finally:
            if writing.done():
                self._writing, self._in_flight = None, {}

    async def _put(self, store: ObjectStore, items: list[bytes]) -> None:
        self.read_back.update((await store.put_many_read_back(items))[1])

    async def settle(self) -> None:
        """Wait for a block write that a cancellation left running (its error, if any, is the
        pull's to report, not this wait's)."""
        writing, self._writing, self._in_flight = self._writing, None, {}
        if writing is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(writing)

    async def discard_added(self) -> None:
        """Remove what this stash added (after the source proved untrustworthy)."""
        await self.settle()
        self._pending.clear()
        self._pending_bytes = 0
        for hash in self.added if self.store is not None else ():
            await self.store.delete(hash)  # type: ignore[union-attr]  # the loop runs only when store is set
        self.added.clear()


FetchBlock = Callable[[Multihash], Awaitable[bytes]]
"""Reads a remote block's bytes by hash; ``ObjectNotFoundError`` if the remote lacks it."""


class _RemoteBlocks:
    """A remote's blocks, read from the local store first when an interrupted pull stashed them
    there; ``fetched`` says whether the last block came from the remote."""

    def __init__(self, fetch: FetchBlock, stash: BlockStash) -> None:
        self._fetch = fetch
        self._stash = stash
        self.fetched = False

    async def get_bytes(self, hash: Multihash) -> bytes:
        data = await self._stash.local_bytes(hash)
        self.fetched = data is None
        return await self._fetch(hash) if data is None else data


async def walk_remote_chain(
    remote_head: Multihash,
    fetch: FetchBlock,
    cursor: LocalCursor,
    stash: BlockStash,
    *,
    where: str,
    on_block: Callable[[int], None] | None = None,
    on_new: Callable[[VerifiedBlock], Awaitable[None]] | None = None,
    max_blocks: int = MAX_CHAIN_LENGTH,
    flush: bool = True,
) -> WalkResult:
    """Walk back from ``remote_head`` (Simple Transfer Protocol) to the last shared block.

    Blocks already in the local store (from an interrupted pull) are read locally.
    ``on_new`` sees each new block as soon as it is verified and linked to the head, newest
    first (a pull starts fetching its objects while the walk goes on). Without ``flush`` the
    blocks still waiting in ``stash`` are left for the caller to store (a pull stores them
    while its downloads go on, and waits for them before its commit).
    """
    newest_first: list[VerifiedBlock] = []
    common: ChainPoint | None = None
    source = _RemoteBlocks(fetch, stash)
    async with aclosing(read_back(source, remote_head, strict=True)) as items:
        async for item in items:
            if isinstance(item, ChainFault):
                raise _corrupt(item, where)
            if not newest_first:
                _check_length(item, where, max_blocks)
            sequence_number = item.block.sequence_number
            if await cursor.hash_at(sequence_number) == item.hash:
                common = ChainPoint(item.hash, sequence_number)
                break
            if source.fetched:
                await stash.add(item.hash, item.data)
            verified = VerifiedBlock(item.hash, item.block)
            newest_first.append(verified)
            if on_block is not None:
                on_block(1)
            if on_new is not None:
                await on_new(verified)
    if flush:
        await stash.flush()
    newest_first.reverse()
    remote = ChainPoint(
        remote_head,
        (
            newest_first[-1].block.sequence_number
            if newest_first
            else common.sequence_number
            if common
            else None
        ),
    )
    return WalkResult(newest_first, common, cursor.head, remote)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a run of blocks is decoded or unpacked (no await
    inside).

    Decoding makes a dozen lasting, acyclic objects a block; their allocations alone set off
    collections that walk everything the process holds: 10,000 blocks took 0.11-0.13 s to
    check with the collector on, 0.06 s with it off. It runs again as soon as they are made,
    and they go straight to its oldest generation (``freeze`` then ``unfreeze``): young
    collections do not walk them, nor does their number bring a full collection forward (a
    pull of 10,000 blocks ran one during its downloads, 0.04-0.15 s holding the GIL; without,
    its pulling process used ~0.08 s less CPU)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        gc.enable()


def _check_part(
    checks: Iterator[ChainItem], verified: list[VerifiedBlock], where: str, max_blocks: int
) -> int:
    """Decode and check up to ``_CHECK_RUN`` more blocks of ``checks`` onto ``verified``;
    returns its length after them (blocking: ``match_linked_run`` runs it in a worker thread,
    so the event loop serves the pull's downloads meanwhile)."""
    with collector_paused():
        for checked in itertools.islice(checks, _CHECK_RUN):
            if isinstance(checked, ChainFault):
                raise _corrupt(checked, where)
            if not verified:
                _check_length(checked, where, max_blocks)
            verified.append(VerifiedBlock(checked.hash, checked.block))
    return len(verified)


async def match_linked_run(
    blocks: Sequence[tuple[Multihash, bytes]],
    begin_after: ChainPoint | None,
    cursor: LocalCursor,
    *,
    where: str,
    max_blocks: int = MAX_CHAIN_LENGTH,
    on_checked: Callable[[list[VerifiedBlock]], Awaitable[None]] | None = None,
) -> WalkResult:
    """Verify a run of blocks received oldest first (Smart Transfer Protocol tarball) that must
    continue ``begin_after`` (``None``: start at the seed), and find the last shared block.

    Each block's bytes must already have been found to hash to its name: ``unpack_blocks``
    checks that of every member of the tarball. Blocks are checked newest first, as the Simple
    protocol's walk meets them, ``_CHECK_RUN`` at a time; ``on_checked`` sees each such part as
    soon as its blocks are decoded and linked to the newest (a pull starts fetching their
    objects while the rest are checked, as ``walk_remote_chain``'s ``on_new`` does). Whether the
    run continues ``begin_after`` is known only at its oldest block, so ``on_checked`` may see
    blocks of a run that is then refused."""
    verified: list[VerifiedBlock] = []
    checks = check_run(reversed(blocks), strict=True, hashed=True)
    start = 0
    while (
        end := await asyncio.to_thread(_check_part, checks, verified, where, max_blocks)
    ) > start:
        if on_checked is not None:
            await on_checked(verified[start:end])
        start = end
    if verified:
        oldest = verified[-1].block
        expected_prev = begin_after.hash if begin_after is not None else None
        if oldest.prev_block_hash != expected_prev:
            raise CorruptSourceError(
                f"{where}: the first block sent, {verified[-1].hash}, links to "
                f"{oldest.prev_block_hash or '<nothing>'} instead of {expected_prev or '<nothing>'}"
            )
    if not verified:
        head = begin_after
        return WalkResult([], head, cursor.head, head or ChainPoint(None, None))
    remote = verified[0].point
    new: list[VerifiedBlock] = []
    common: ChainPoint | None = None
    for item in verified:
        if await cursor.hash_at(item.block.sequence_number) == item.hash:
            common = item.point
            break
        new.append(item)
    else:
        if (
            begin_after is not None
            and begin_after.sequence_number is not None
            and await cursor.hash_at(begin_after.sequence_number) == begin_after.hash
        ):
            common = begin_after
    new.reverse()
    return WalkResult(new, common, cursor.head, remote)
