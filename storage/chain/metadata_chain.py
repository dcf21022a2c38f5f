"""A dataset's metadata chain over an object store (blocks) and a ref store (``head``).

Appending checks the block against the chain rules, stores it, and only then moves ``head`` by
compare-and-swap from the block's own ``prevBlockHash``: two writers that both built on the same
head cannot both win, and a writer killed at any point leaves ``head`` at a complete block.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from protocol.codec.flatbuffers import block_hash, decode_block, hash_block, is_block_hash, peek_prev_block_hash
from protocol.identity import Multihash
from protocol.identity import DatasetId
from protocol.model import AddData, ExecuteTransform, MetadataBlock, MetadataEvent, Timestamp
from storage.chain.rules import ChainState
from storage.errors import ChainRuleError, HashMismatchError, ObjectNotFoundError, StorageError
from storage.layout import HEAD_REF
from storage.stores.base import ObjectStore, RefStore

FORWARD_SEGMENT = 1024
"""Blocks held in memory at once by ``iter_blocks_forward``."""

HeadListener = Callable[[Multihash, int], Awaitable[None]]

_CATCH_UP_LIMIT = 100_000
"""How far back from a new head we look for the cached state before recomputing it."""


class MetadataChain:
    def __init__(
        self,
        blocks: ObjectStore,
        refs: RefStore,
        *,
        dataset_id: DatasetId | None = None,
        data: ObjectStore | None = None,
        checkpoints: ObjectStore | None = None,
        on_head_moved: HeadListener | None = None,
    ) -> None:
        """``data`` and ``checkpoints``, when given, must hold every object a new block names.
        ``on_head_moved(new_head, sequence_number)`` runs after every head move made here (the
        workspace uses it to keep the catalog current)."""
        self.blocks = blocks
        self.refs = refs
        self.dataset_id = dataset_id
        self.on_head_moved = on_head_moved
        self._data = data
        self._checkpoints = checkpoints
        self._state: ChainState | None = None

    # --- reading --------------------------------------------------------------------------------

    async def head(self) -> Multihash | None:
        return await self.refs.get(HEAD_REF)

    async def get_block_bytes(self, hash: Multihash) -> bytes:
        return await self.blocks.get_bytes(hash)

    async def get_block(self, hash: Multihash) -> MetadataBlock:
        """The block named ``hash``; its bytes are re-hashed so a corrupt file cannot pass."""
        return _decode_verified(hash, await self.blocks.get_bytes(hash))

    async def _get_linked(self, hash: Multihash, child: tuple[Multihash, int | None] | None) -> bytes:
        """Bytes of ``hash``; a missing block named by ``child`` (hash, sequence number) is a
        broken chain, reported against the child."""
        try:
            return await self.blocks.get_bytes(hash)
        except ObjectNotFoundError:
            if child is None:
                raise
            raise _missing_block(hash, child) from None

    async def iter_blocks(
        self, start: Multihash | None = None, stop_at: Multihash | None = None
    ) -> AsyncIterator[tuple[Multihash, MetadataBlock]]:
        """Blocks newest first from ``start`` (default: head) down to, excluding, ``stop_at``."""
        hash = start if start is not None else await self.head()
        child: tuple[Multihash, int | None] | None = None
        while hash is not None and hash != stop_at:
            block = _decode_verified(hash, await self._get_linked(hash, child))
            yield hash, block
            child = (hash, block.sequence_number)
            hash = block.prev_block_hash
        if stop_at is not None and hash != stop_at:
            raise StorageError(f"block {stop_at} is not an ancestor of {start}")

    async def _read_segment(
        self, start: Multihash, stop_at: Multihash | None
    ) -> list[tuple[Multihash, MetadataBlock]]:
        """``iter_blocks(start, stop_at)`` as a list: a bounded segment, read without an
        async-generator step per block (validation reads every block of a chain this way)."""
        blocks: list[tuple[Multihash, MetadataBlock]] = []
        get_bytes = self.blocks.get_bytes
        hash: Multihash | None = start
        child: tuple[Multihash, int | None] | None = None
        while hash is not None and hash != stop_at:
            try:
                data = await get_bytes(hash)
            except ObjectNotFoundError:
                if child is None:
                    raise
                raise _missing_block(hash, child) from None
            block = _decode_verified(hash, data)
            blocks.append((hash, block))
            child = (hash, block.sequence_number)
            hash = block.prev_block_hash
        if stop_at is not None and hash != stop_at:
            raise StorageError(f"block {stop_at} is not an ancestor of {start}")
        return blocks

    async def iter_blocks_forward(
        self, head: Multihash | None = None, *, segment: int = FORWARD_SEGMENT
    ) -> AsyncIterator[tuple[Multihash, MetadataBlock]]:
        """Blocks oldest first up to ``head`` (default: the current head).

        Memory stays bounded however long the chain is: a first backward pass reads only each
        block's link and keeps every ``segment``-th hash; then each segment is decoded backward
        and yielded forward. Chains of up to ``segment`` blocks are read once.
        """
        head = head if head is not None else await self.head()
        if head is None:
            return
        anchors: list[Multihash] = []
        recent: list[tuple[Multihash, bytes]] = []
        count = 0
        hash: Multihash | None = head
        child: tuple[Multihash, int | None] | None = None
        get_bytes = self.blocks.get_bytes
        while hash is not None:
            try:
                data = await get_bytes(hash)
            except ObjectNotFoundError:
                if child is None:
                    raise
                raise _missing_block(hash, child) from None
            if count % segment == 0:
                anchors.append(hash)
            if count < segment:
                recent.append((hash, data))
            count += 1
            child = (hash, None)
            hash = peek_prev_block_hash(data)
        if count <= segment:
            for hash, data in reversed(recent):
                yield hash, _decode_verified(hash, data)
            return
        recent.clear()
        for i in range(len(anchors) - 1, -1, -1):
            stop = anchors[i + 1] if i + 1 < len(anchors) else None
            for item in reversed(await self._read_segment(anchors[i], stop)):
                yield item

    # --- state ----------------------------------------------------------------------------------

    async def state(self, head: Multihash | None = None, *, use_current_head: bool = True) -> ChainState:
        """The rules' summary of the chain at ``head`` (default: the current head).

        Computed by validating the chain once, then kept up to date as blocks are appended (by
        this object or, found by walking back from a newer head, by anyone else).
        """
        if head is None and use_current_head:
            head = await self.head()
        if head is None:
            return ChainState(self.dataset_id)
        cached = self._state
        if cached is not None and cached.head == head:
            return cached.copy()
        if cached is not None:
            newer: list[tuple[Multihash, MetadataBlock]] = []
            async for item in self.iter_blocks(head):
                if item[0] == cached.head:
                    break
                newer.append(item)
                if len(newer) > _CATCH_UP_LIMIT or item[1].prev_block_hash is None:
                    newer = []
                    break
            if newer and newer[-1][1].prev_block_hash == cached.head:
                state = cached.copy()
                for hash, block in reversed(newer):
                    state.apply(hash, block)
                self._state = state
                return state.copy()
        state = ChainState(self.dataset_id)
        async for hash, block in self.iter_blocks_forward(head):
            state.apply(hash, block)
        self._state = state
        return state.copy()

    # --- appending ------------------------------------------------------------------------------

    async def append(self, block: MetadataBlock) -> Multihash:
        """Check, store and make ``block`` the head; ``RefCasError`` if head is no longer
        ``block.prev_block_hash``."""
        return await self.append_many([block])

    async def append_many(self, blocks: Sequence[MetadataBlock]) -> Multihash:
        """Check and store a run of consecutive blocks, then move head once to the last."""
        if not blocks:
            raise StorageError("append_many needs at least one block")
        expected = blocks[0].prev_block_hash
        state = await self.state(expected, use_current_head=False)
        encoded: list[bytes] = []
        for block in blocks:
            hash, data = hash_block(block)
            state.apply(hash, block)
            await self._check_objects(hash, block)
            encoded.append(data)
        await self.blocks.put_many(encoded)
        return await self._move_head(expected, state)

    async def append_events(
        self, events: Sequence[MetadataEvent], *, expected_head: Multihash | None, system_time: Timestamp
    ) -> tuple[Multihash, list[MetadataBlock]]:
        """Wrap events into the blocks following ``expected_head`` (one system time), check,
        store and move head once; returns the new head and the blocks."""
        if not events:
            raise StorageError("append_events needs at least one event")
        state = await self.state(expected_head, use_current_head=False)
        blocks: list[MetadataBlock] = []
        encoded: list[bytes] = []
        prev = expected_head
        for event in events:
            block = MetadataBlock(system_time=system_time, prev_block_hash=prev,
                                  sequence_number=state.sequence_number + 1, event=event)
            prev, data = hash_block(block)
            state.apply(prev, block)
            await self._check_objects(prev, block)
            blocks.append(block)
            encoded.append(data)
        await self.blocks.put_many(encoded)
        return await self._move_head(expected_head, state), blocks

    async def append_stored(self, hashes: Sequence[Multihash]) -> Multihash:
        """Move head over blocks already in the block store (oldest first), after checking each
        one's hash, the rules and the objects it names. Replication stores blocks as it receives
        them and calls this last."""
        if not hashes:
            raise StorageError("append_stored needs at least one block")
        blocks = [await self.get_block(h) for h in hashes]
        expected = blocks[0].prev_block_hash
        state = await self.state(expected, use_current_head=False)
        for hash, block in zip(hashes, blocks, strict=True):
            state.apply(hash, block)
            await self._check_objects(hash, block)
        return await self._move_head(expected, state)

    async def _move_head(self, expected: Multihash | None, state: ChainState) -> Multihash:
        new_head = state.head
        assert new_head is not None  # state advanced by at least one block
        await self.refs.set(HEAD_REF, new_head, expected=expected)
        self._state = state
        if self.on_head_moved is not None:
            await self.on_head_moved(new_head, state.sequence_number)
        return new_head

    async def _check_objects(self, hash: Multihash, block: MetadataBlock) -> None:
        await check_block_objects(hash, block, self._data, self._checkpoints)


async def check_block_objects(
    hash: Multihash, block: MetadataBlock, data: ObjectStore | None, checkpoints: ObjectStore | None
) -> None:
    """Raise ``ChainRuleError('missing-object')`` unless the data slice and checkpoint a block
    names are in their stores with the recorded sizes (stores given as ``None`` are skipped)."""
    event = block.event
    if not isinstance(event, (AddData, ExecuteTransform)):
        return
    if event.new_data is not None and data is not None:
        await _check_object(data, event.new_data.physical_hash, event.new_data.size,
                            "event.newData", hash, block)
    if event.new_checkpoint is not None and checkpoints is not None:
        await _check_object(checkpoints, event.new_checkpoint.physical_hash,
                            event.new_checkpoint.size, "event.newCheckpoint", hash, block)


async def _check_object(
    store: ObjectStore, object_hash: Multihash, size: int, field: str, hash: Multihash,
    block: MetadataBlock,
) -> None:
    try:
        actual = await store.size(object_hash)
    except ObjectNotFoundError:
        raise ChainRuleError("missing-object", f"{field}.physicalHash {object_hash} is not stored",
                             sequence_number=block.sequence_number, block_hash=hash) from None
    if actual != size:
        raise ChainRuleError("missing-object", f"{field} {object_hash} is {actual} bytes, "
                             f"the block records {size}", sequence_number=block.sequence_number,
                             block_hash=hash)


def _missing_block(hash: Multihash, child: tuple[Multihash, int | None]) -> ChainRuleError:
    """A broken link: ``child`` (hash, sequence number) names ``hash``, which is not stored."""
    return ChainRuleError(
        "missing-block", f"prevBlockHash names block {hash}, which is not stored",
        sequence_number=child[1], block_hash=child[0],
    )


def _decode_verified(hash: Multihash, data: bytes) -> MetadataBlock:
    if not is_block_hash(hash, data):
        raise HashMismatchError(f"block file {hash}", hash, block_hash(data))
    return decode_block(data)
