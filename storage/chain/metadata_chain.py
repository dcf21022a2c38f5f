"""A dataset's metadata chain over an object store (blocks) and a ref store (``head``).

Appending checks the block against the chain rules, stores it, and only then moves ``head`` by
compare-and-swap from the block's own ``prevBlockHash``: two writers that both built on the same
head cannot both win, and a writer killed at any point leaves ``head`` at a complete block.

The rules' summary at a head (``state``) is a fold over the chain. So that asking for it does not
cost a pass over the chain each time, the chain keeps the states it computed (the few most recent,
plus one every ``STATE_CHECKPOINT_INTERVAL`` blocks) and works forward from the nearest one that is
an ancestor; and with a ``SavedStateStore`` it saves the state at each new head and restores it in
a new process from a few blocks (``storage.chain.saved_state``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Container, Iterator, Sequence
from contextlib import aclosing

from protocol.codec.flatbuffers import hash_block
from protocol.errors import DecodeError
from protocol.identity import DatasetId, Multihash
from protocol.model import AddData, ExecuteTransform, MetadataBlock, MetadataEvent, Timestamp
from storage.chain.reader import (
    FORWARD_SEGMENT,
    BlockPosition,
    BrokenLink,
    BrokenSequence,
    ChainFault,
    HashMismatch,
    MalformedBlock,
    MissingBlock,
    check_block,
    check_hash,
    read_back,
    read_back_from_folder,
    read_forward,
)
from storage.chain.rules import ChainState
from storage.chain.saved_state import SavedState, SavedStateError, SavedStateStore
from storage.crashpoints import crash_point
from storage.errors import ChainRuleError, HashMismatchError, ObjectNotFoundError, StorageError
from storage.layout import HEAD_REF, DatasetLayout
from storage.lru import Lru
from storage.stores.base import ObjectStore, RefStore
from storage.stores.ref_file import read_ref_file

_log = logging.getLogger(__name__)

HeadListener = Callable[[Multihash, int], Awaitable[None]]

STATE_CHECKPOINT_INTERVAL = 512
"""Computing a state keeps the states at every block whose sequence number is a multiple of this,
so the state at any older block costs at most this many blocks after the first pass."""

_RECENT_STATES = 8
"""States most recently asked for or moved to, kept besides the checkpoints (callers walking a
chain forward ask for each state a little after the last)."""

_SAVE_AFTER_BLOCKS = 256
"""A state at the current head computed over at least this many blocks is saved, so the next
process restores it (head moves save theirs anyway)."""
_CHECK_STORED_TURN = 500
"""Blocks ``check_stored`` re-reads between turns of the event loop."""


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
        saved_states: SavedStateStore | None = None,
    ) -> None:
        """``data`` and ``checkpoints``, when given, must hold every object a new block names.
        ``on_head_moved(new_head, sequence_number)`` runs after every head move made here (the
        workspace uses it to keep the catalog current). ``saved_states`` (used when
        ``dataset_id`` is known) keeps the state at the head across processes."""
        self.blocks = blocks
        self.refs = refs
        self.dataset_id = dataset_id
        self.on_head_moved = on_head_moved
        self.saved_states = saved_states
        self._data = data
        self._checkpoints = checkpoints
        self._recent_states: Lru[Multihash, ChainState] = Lru(_RECENT_STATES)
        self._state_checkpoints: dict[Multihash, ChainState] = {}
        self._saved_state_consulted = False

    # --- reading --------------------------------------------------------------------------------

    async def head(self) -> Multihash | None:
        return await self.refs.get(HEAD_REF)

    async def get_block_bytes(self, hash: Multihash) -> bytes:
        return await self.blocks.get_bytes(hash)

    async def check_stored(self, hashes: Sequence[Multihash]) -> None:
        """Each stored block file in ``hashes`` holds bytes that hash to its name (re-read, not
        decoded); the loop gets a turn every few hundred blocks, so this can run beside other
        work (a pull runs it while its last data files are checked and named)."""
        import asyncio  # here: commands that only read a chain (``odfd log``) load no event loop

        for number, hash in enumerate(hashes, 1):
            await self._check_stored(hash)
            if number % _CHECK_STORED_TURN == 0:
                await asyncio.sleep(0)

    async def _check_stored(self, hash: Multihash) -> None:
        """The stored file named ``hash`` holds bytes that hash to it (not decoded)."""
        if (mismatch := check_hash(hash, await self.blocks.get_bytes(hash))) is not None:
            raise fault_error(mismatch)

    async def get_block(self, hash: Multihash) -> MetadataBlock:
        """The block named ``hash``; its bytes are re-hashed so a corrupt file cannot pass."""
        item = check_block(hash, await self.blocks.get_bytes(hash))
        if isinstance(item, ChainFault):
            raise fault_error(item)
        return item.block

    async def iter_blocks(
        self, start: Multihash | None = None, stop_at: Multihash | None = None
    ) -> AsyncIterator[tuple[Multihash, MetadataBlock]]:
        """Blocks newest first from ``start`` (default: head) down to, excluding, ``stop_at``."""
        start = start if start is not None else await self.head()
        reached = start == stop_at
        async with aclosing(read_back(self.blocks, start, stop_at=stop_at)) as items:
            async for item in items:
                if isinstance(item, ChainFault):
                    raise fault_error(item)
                yield item.hash, item.block
                reached = item.block.prev_block_hash == stop_at
        if stop_at is not None and not reached:
            raise StorageError(f"block {stop_at} is not an ancestor of {start}")

    async def iter_blocks_forward(
        self,
        head: Multihash | None = None,
        *,
        after: Container[Multihash] = (),
        segment: int = FORWARD_SEGMENT,
    ) -> AsyncIterator[tuple[Multihash, MetadataBlock]]:
        """Blocks oldest first up to ``head`` (default: the current head): from the ``Seed``, or
        from the block after the newest ancestor of ``head`` that is in ``after``
        (``storage.chain.reader.read_forward``: memory bounded however long the chain is; links
        that go on past the ``Seed`` the head's sequence number implies raise ``ChainRuleError``).
        """
        head = head if head is not None else await self.head()
        async with aclosing(read_forward(self.blocks, head, after=after, segment=segment)) as items:
            async for item in items:
                if isinstance(item, ChainFault):
                    raise fault_error(item)
                yield item.hash, item.block

    # --- state ----------------------------------------------------------------------------------

    async def state(
        self, head: Multihash | None = None, *, use_current_head: bool = True
    ) -> ChainState:
        """The rules' summary of the chain at ``head`` (default: the current head).

        From a state kept in memory when there is one for ``head``; else from the saved state
        when it is for ``head``; else worked forward from the nearest kept (or saved) state that
        is an ancestor of ``head``, or from the ``Seed``. Always equal to validating the chain
        up to ``head``.
        """
        if head is None and use_current_head:
            head = await self.head()
        if head is None:
            return ChainState(self.dataset_id)
        state = self._known_state(head)
        if state is None:
            state = await self._restore_saved_state(head)
        if state is None:
            state, blocks_applied = await self._compute_state(head)
            if (
                blocks_applied >= _SAVE_AFTER_BLOCKS
                and self.saved_states is not None
                and head == await self.head()
            ):
                await self._save_state(state)
        self._remember(state)
        return state.copy()

    async def _compute_state(self, head: Multihash) -> tuple[ChainState, int]:
        """The state at ``head`` from the nearest known ancestor state; keeps a checkpoint every
        ``STATE_CHECKPOINT_INTERVAL`` blocks on the way. Returns it and the blocks applied."""
        # the states kept when the walk starts, copied: the base's stays here even if another
        # caller's state pushes it out of the recent ones meanwhile
        known = {**self._state_checkpoints, **dict(self._recent_states.items())}
        state: ChainState | None = None
        applied = 0
        async for hash, block in self.iter_blocks_forward(head, after=known):
            if state is None:
                base = block.prev_block_hash
                state = known[base].copy() if base is not None else ChainState(self.dataset_id)
            state.apply(hash, block)
            applied += 1
            if block.sequence_number % STATE_CHECKPOINT_INTERVAL == 0:
                self._state_checkpoints[hash] = state.copy()
        assert state is not None  # head is not known, so at least the head was applied
        return state, applied

    async def _restore_saved_state(self, head: Multihash) -> ChainState | None:
        """Restore the saved state into the kept ones; returns it if it is the state at ``head``.

        Consulted once per chain object, on the first state not kept in memory: after that the
        kept states are at least as recent as what was saved, or lead to it as cheaply. A saved
        state for another head still helps when it is an ancestor of ``head``. One that cannot be
        read or restored is ignored: the chain is the truth, the saved state a cache.
        """
        if self.saved_states is None or self.dataset_id is None or self._saved_state_consulted:
            return None
        self._saved_state_consulted = True
        data = await self.saved_states.load(self.dataset_id)
        if data is None:
            return None
        try:
            saved = SavedState.from_bytes(data)
            if saved.dataset_id != self.dataset_id or self._known_state(saved.head) is not None:
                return None
            state = await saved.restore(self.get_block)
        except (SavedStateError, StorageError, DecodeError):
            return None
        self._remember(state)
        return state if saved.head == head else None

    async def _save_state(self, state: ChainState) -> None:
        """Best effort: the saved state is a cache, and by now the head has already moved, so a
        failure to save (a busy or read-only catalog) costs the next process a recomputation only."""
        if (
            self.saved_states is not None
            and self.dataset_id is not None
            and state.seed_block is not None
        ):
            saved = SavedState.of(state)
            try:
                await self.saved_states.save(self.dataset_id, saved.head, saved.to_bytes())
            except (OSError, sqlite3.Error, StorageError) as error:
                _log.warning(
                    "could not save the chain state of %s at %s: %s",
                    self.dataset_id,
                    saved.head,
                    error,
                )

    def _remember(self, state: ChainState) -> None:
        assert state.head is not None  # only states past a block are kept
        self._recent_states.put(state.head, state)

    def _known_state(self, head: Multihash) -> ChainState | None:
        """The state at ``head`` kept in memory (recent or a checkpoint), if any; looking does
        not count as a use (``_remember`` does)."""
        recent = self._recent_states.peek(head)
        return recent if recent is not None else self._state_checkpoints.get(head)

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
        await self._store_checked(blocks, state)
        return await self._move_head(expected, state)

    async def append_events(
        self,
        events: Sequence[MetadataEvent],
        *,
        expected_head: Multihash | None,
        system_time: Timestamp,
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
            block = MetadataBlock(
                system_time=system_time,
                prev_block_hash=prev,
                sequence_number=state.sequence_number + 1,
                event=event,
            )
            prev, data = hash_block(block)
            state.apply(prev, block)
            await self._check_objects(prev, block)
            blocks.append(block)
            encoded.append(data)
        await self.blocks.put_many(encoded)
        return await self._move_head(expected_head, state), blocks

    async def append_stored(
        self,
        hashes: Sequence[Multihash],
        decoded: Sequence[MetadataBlock] | None = None,
        *,
        stored_checked: bool = False,
    ) -> Multihash:
        """Move head over blocks already in the block store (oldest first), after checking each
        one's hash, the rules and the objects it names. Replication stores blocks as it receives
        them and calls this last. ``decoded``: the same blocks as the caller decoded them from
        the bytes it verified; each stored file is still re-read and hash-checked (a corrupt
        file cannot pass), but not decoded again; ``stored_checked``: the caller did that
        re-read (``check_stored`` of these hashes, after they were stored) beside other work."""
        if not hashes:
            raise StorageError("append_stored needs at least one block")
        if decoded is None:
            blocks = [await self.get_block(h) for h in hashes]
        else:
            if len(decoded) != len(hashes):
                raise StorageError("append_stored: one decoded block per hash")
            if not stored_checked:
                await self.check_stored(hashes)
            blocks = list(decoded)
        expected = blocks[0].prev_block_hash
        state = await self.state(expected, use_current_head=False)
        for hash, block in zip(hashes, blocks, strict=True):
            state.apply(hash, block)
            await self._check_objects(hash, block)
        return await self._move_head(expected, state)

    async def reset_to(self, block: Multihash, *, expected_head: Multihash) -> Multihash:
        """Move head back to ``block``, which must be ``expected_head`` or one of its ancestors
        (``odfd reset``). The later blocks stay in the store, unreferenced, and nothing is
        deleted; ``RefCasError`` if the head is no longer ``expected_head``."""
        async for hash, _ in self.iter_blocks(expected_head):
            if hash == block:
                break
        else:
            raise StorageError(f"block {block} is not in the history of head {expected_head}")
        state = await self.state(block, use_current_head=False)
        return await self._move_head(expected_head, state)

    async def replace_history(
        self, blocks: Sequence[MetadataBlock], *, expected_head: Multihash
    ) -> Multihash:
        """Make ``blocks`` (a whole chain, ``Seed`` first) the history, replacing the one ending
        at ``expected_head`` (``odfd compact``). The new chain is checked from its ``Seed`` by
        the rules, every object it names must be stored, its blocks are stored, and only then
        does head move, by compare-and-swap; the old blocks stay in the store, unreferenced."""
        if not blocks or blocks[0].prev_block_hash is not None:
            raise StorageError("replace_history needs a whole chain, starting at its Seed")
        state = ChainState(self.dataset_id)
        await self._store_checked(blocks, state)
        return await self._move_head(expected_head, state)

    async def _store_checked(self, blocks: Sequence[MetadataBlock], state: ChainState) -> None:
        """Applies ``blocks`` to ``state`` (the chain rules), checks the objects each names are
        stored, then stores the blocks; head does not move here."""
        encoded: list[bytes] = []
        for block in blocks:
            hash, data = hash_block(block)
            state.apply(hash, block)
            await self._check_objects(hash, block)
            encoded.append(data)
        await self.blocks.put_many(encoded)

    async def _move_head(self, expected: Multihash | None, state: ChainState) -> Multihash:
        new_head = state.head
        assert new_head is not None  # state advanced by at least one block
        crash_point("chain.blocks-stored")
        await self.refs.set(HEAD_REF, new_head, expected=expected)
        crash_point("chain.head-moved")
        self._remember(state)
        if self.on_head_moved is not None:
            await self.on_head_moved(new_head, state.sequence_number)
        await self._save_state(state)
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
        await _check_object(
            data, event.new_data.physical_hash, event.new_data.size, "event.newData", hash, block
        )
    if event.new_checkpoint is not None and checkpoints is not None:
        await _check_object(
            checkpoints,
            event.new_checkpoint.physical_hash,
            event.new_checkpoint.size,
            "event.newCheckpoint",
            hash,
            block,
        )


async def _check_object(
    store: ObjectStore,
    object_hash: Multihash,
    size: int,
    field: str,
    hash: Multihash,
    block: MetadataBlock,
) -> None:
    try:
        actual = await store.size(object_hash)
    except ObjectNotFoundError:
        raise ChainRuleError(
            "missing-object",
            f"{field}.physicalHash {object_hash} is not stored",
            sequence_number=block.sequence_number,
            block_hash=hash,
        ) from None
    if actual != size:
        raise ChainRuleError(
            "missing-object",
            f"{field} {object_hash} is {actual} bytes, the block records {size}",
            sequence_number=block.sequence_number,
            block_hash=hash,
        )


def iter_blocks_on_disk(layout: DatasetLayout) -> Iterator[tuple[Multihash, MetadataBlock]]:
    """``MetadataChain.iter_blocks()`` of a dataset folder on this machine, read without an event
    loop (``odfd log`` starts in half the time), with the same checks and errors."""
    head = read_ref_file(layout.refs_dir / HEAD_REF)
    for item in read_back_from_folder(layout.blocks_dir, head):
        if isinstance(item, ChainFault):
            raise fault_error(item)
        yield item.hash, item.block


def fault_error(fault: ChainFault) -> StorageError | DecodeError:
    """A fault met reading a local chain as the error the chain raises: a missing head block as
    ``ObjectNotFoundError``, a missing parent or a misplaced one as ``ChainRuleError`` against the
    block that names it, a corrupt block file as ``HashMismatchError`` or ``DecodeError``."""
    child = fault.child
    match fault:
        case MissingBlock() if child is not None:
            return ChainRuleError(
                "missing-block",
                f"prevBlockHash names block {fault.hash}, which is not stored",
                sequence_number=child.sequence_number,
                block_hash=child.hash,
            )
        case MissingBlock():
            return ObjectNotFoundError(fault.store, fault.hash)
        case HashMismatch():
            return HashMismatchError(f"block file {fault.hash}", fault.hash, fault.actual)
        case MalformedBlock():
            return DecodeError(fault.reason)
        case BrokenSequence(counted_from=BlockPosition() as head):
            return ChainRuleError(
                "sequence-number",
                f"block {fault.hash} is {head.sequence_number} blocks below head {head.hash} "
                f"(#{head.sequence_number}), so it must be #0, but its prevBlockHash names "
                f"{fault.prev_block_hash}: the links do not end at the Seed (a cycle or a "
                "corrupt block)",
                sequence_number=0,
                block_hash=fault.hash,
            )
        case BrokenSequence() if child is not None:
            return ChainRuleError(
                "sequence-number",
                f"block {fault.hash} has sequenceNumber {fault.sequence_number} but is the "
                f"previous block of {child.hash} (#{child.sequence_number}): sequence numbers "
                "must decrease walking back",
                sequence_number=fault.sequence_number,
                block_hash=fault.hash,
            )
        case BrokenSequence():
            return ChainRuleError(
                "sequence-number",
                "only block #0 has no prevBlockHash",
                sequence_number=fault.sequence_number,
                block_hash=fault.hash,
            )
        case BrokenLink():
            return ChainRuleError(
                "hash-link",
                f"prevBlockHash names {fault.named}, not block {fault.hash}",
                sequence_number=None if child is None else child.sequence_number,
                block_hash=None if child is None else child.hash,
            )
    raise AssertionError(f"unknown chain fault {fault!r}")
