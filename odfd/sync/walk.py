"""Walking a remote chain back to the last block both sides share, verifying every block.

A block is accepted only if its bytes hash to the name it was asked for and decode, and if it
links exactly to the block after it: ``prevBlockHash`` names the next block walked and sequence
numbers drop by one down to a seed at 0. The head's sequence number therefore bounds the walk:
an endless or cyclic chain cannot pass, and ``MAX_CHAIN_LENGTH`` bounds the head itself.

The fork point is found in the same pass: a cursor walks the local chain down in step with the
remote one, and the first remote block that equals the local block at the same sequence number
is the last shared block. Everything newer on the remote side is what a pull brings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from odfd.sync.errors import ChainPoint, CorruptSourceError
from protocol.codec.flatbuffers import block_hash, decode_block, peek_prev_block_hash
from protocol.errors import DecodeError
from protocol.identity import DatasetId, Multihash
from protocol.model import MetadataBlock, Seed
from storage.chain import MetadataChain
from storage.errors import ObjectNotFoundError
from storage.stores.base import ObjectStore

MAX_CHAIN_LENGTH = 10_000_000
"""Longest remote chain a walk accepts by default (its head's sequence number + 1)."""
_STASH_BATCH = 512


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


def verify_block(hash: Multihash, data: bytes, where: str) -> MetadataBlock:
    """Decode a block whose bytes must hash to ``hash``; ``CorruptSourceError`` otherwise."""
    actual = block_hash(data)
    if actual != hash:
        raise CorruptSourceError(f"{where}: block {hash} has bytes that hash to {actual}")
    try:
        return decode_block(data)
    except DecodeError as err:
        raise CorruptSourceError(f"{where}: block {hash} does not decode: {err}") from None


def check_link(
    child: VerifiedBlock | None,
    hash: Multihash,
    block: MetadataBlock,
    where: str,
    max_blocks: int = MAX_CHAIN_LENGTH,
) -> None:
    """``block`` (named ``hash``) must be the block right before ``child`` (newest first)."""
    seq = block.sequence_number
    if child is None:
        if seq < 0 or seq >= max_blocks:
            raise CorruptSourceError(
                f"{where}: head block {hash} has sequence number {seq}: a chain of "
                f"{seq + 1} blocks is over the limit of {max_blocks}"
            )
    elif seq != child.block.sequence_number - 1:
        raise CorruptSourceError(
            f"{where}: block {hash} has sequence number {seq} but block {child.hash} "
            f"(#{child.block.sequence_number}) links to it: the chain does not link"
        )
    if (seq == 0) != (block.prev_block_hash is None):
        raise CorruptSourceError(
            f"{where}: block {hash} (#{seq}) "
            + (
                "is first but has a prevBlockHash"
                if seq == 0
                else "has no prevBlockHash but is not block #0"
            )
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
        self._pending: list[tuple[Multihash, bytes]] = []

    async def local_bytes(self, hash: Multihash) -> bytes | None:
        for pending_hash, data in self._pending:
            if pending_hash == hash:
                return data
        if self.store is None:
            return None
        try:
            return await self.store.get_bytes(hash)
        except ObjectNotFoundError:
            return None

    async def add(self, hash: Multihash, data: bytes) -> None:
        if self.store is None:
            return
        self._pending.append((hash, data))
        if len(self._pending) >= _STASH_BATCH:
            await self.flush()

    async def add_many(self, items: Sequence[tuple[Multihash, bytes]]) -> None:
        if self.store is None:
            return
        missing = [(h, d) for h, d in items if not await self.store.contains(h)]
        self._pending.extend(missing)
        await self.flush()

    async def flush(self) -> None:
        if not self._pending or self.store is None:
            return
        batch, self._pending = self._pending, []
        await self.store.put_many([data for _, data in batch])
        self.added.extend(h for h, _ in batch)

    async def discard_added(self) -> None:
        """Remove what this stash added (after the source proved untrustworthy)."""
        self._pending.clear()
        for hash in self.added if self.store is not None else ():
            await self.store.delete(hash)  # type: ignore[union-attr]  # the loop runs only when store is set
        self.added.clear()


FetchBlock = Callable[[Multihash], Awaitable[bytes]]
"""Reads a remote block's bytes by hash; ``ObjectNotFoundError`` if the remote lacks it."""


async def walk_remote_chain(
    remote_head: Multihash,
    fetch: FetchBlock,
    cursor: LocalCursor,
    stash: BlockStash,
    *,
    where: str,
    on_block: Callable[[int], None] | None = None,
    max_blocks: int = MAX_CHAIN_LENGTH,
) -> WalkResult:
    """Walk back from ``remote_head`` (Simple Transfer Protocol) to the last shared block.

    Blocks already in the local store (from an interrupted pull) are read locally.
    """
    newest_first: list[VerifiedBlock] = []
    hash: Multihash | None = remote_head
    child: VerifiedBlock | None = None
    common: ChainPoint | None = None
    while hash is not None:
        data = await stash.local_bytes(hash)
        fetched = data is None
        if data is None:
            try:
                data = await fetch(hash)
            except ObjectNotFoundError:
                linked = (
                    f"block {child.hash} (#{child.block.sequence_number}) links to"
                    if child
                    else "the head is"
                )
                raise CorruptSourceError(
                    f"{where}: {linked} block {hash}, which the remote does not "
                    "serve: the chain does not link"
                ) from None
        block = verify_block(hash, data, where)
        check_link(child, hash, block, where, max_blocks)
        if await cursor.hash_at(block.sequence_number) == hash:
            common = ChainPoint(hash, block.sequence_number)
            break
        if fetched:
            await stash.add(hash, data)
        item = VerifiedBlock(hash, block)
        newest_first.append(item)
        if on_block is not None:
            on_block(1)
        child = item
        hash = block.prev_block_hash
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


async def match_linked_run(
    blocks: Sequence[tuple[Multihash, bytes]],
    begin_after: ChainPoint | None,
    cursor: LocalCursor,
    *,
    where: str,
    max_blocks: int = MAX_CHAIN_LENGTH,
) -> WalkResult:
    """Verify a run of blocks received oldest first (Smart Transfer Protocol tarball) that must
    continue ``begin_after`` (``None``: start at the seed), and find the last shared block."""
    verified: list[VerifiedBlock] = []
    child: VerifiedBlock | None = None
    for hash, data in reversed(blocks):
        block = verify_block(hash, data, where)
        if child is not None and child.block.prev_block_hash != hash:
            raise CorruptSourceError(
                f"{where}: block {child.hash} links to {child.block.prev_block_hash}, "
                f"but the block before it in the tarball is {hash}"
            )
        check_link(child, hash, block, where, max_blocks)
        child = VerifiedBlock(hash, block)
        verified.append(child)
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
