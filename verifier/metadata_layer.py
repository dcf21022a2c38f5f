"""Layer 1, metadata integrity: every block hashes to its name, the links reach the ``Seed``
unbroken, and every chain rule holds.

Two passes. The first walks back from ``head`` through the verified chain reader
(``storage.chain.reader``), so a missing, truncated or edited block is reported by its name and
the sequence number it must have (its child's minus one) before anything trusts its content; on
the way it sizes the work of the other layers. The
second applies the rules every append obeys (``storage.chain.rules``), oldest block first.
Memory stays bounded however long the chain is, but for the block stamps an audit that remembers
keeps (one small record per block).

An audit that remembers (``remember``) stamps each block file it verified and returns what to
remember of the chain (``verifier.chain_memory``); given that memory back (``known``), it reads
only the blocks after the remembered head, starting the rules from the state remembered there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import DecodeError
from protocol.identity import DatasetId, Multihash
from protocol.model import AddData, DatasetKind, ExecuteTransform, MetadataBlock, Seed
from storage.chain.reader import (
    BlockPosition,
    BlockSource,
    BrokenSequence,
    ChainFault,
    HashMismatch,
    MalformedBlock,
    MissingBlock,
    read_back,
)
from storage.chain.rules import ChainState
from storage.chain.saved_state import SavedState, SavedStateError
from storage.dataset import Dataset
from storage.errors import ChainRuleError, CorruptRefError, ObjectNotFoundError, StorageError
from storage.layout import HEAD_REF, object_name
from verifier.audit_state import RACY_NS, now_ns
from verifier.chain_memory import BlockStamp, VerifiedChain, blocks_unchanged
from verifier.progress import Progress
from verifier.report import (
    BlockLocation,
    BlockRange,
    Finding,
    Layer,
    LayerRecorder,
    LayerResult,
    Status,
)
from verifier.selection import RangeRequest, RangeResolver

HEAD_FILE = f"refs/{HEAD_REF}"


@dataclass(frozen=True, slots=True)
class ChainSurvey:
    """What the walk found: the chain's head and kind, and the work in the requested range."""

    head: BlockLocation
    kind: DatasetKind | None
    block_range: BlockRange
    slices: int
    checkpoints: int
    data_bytes: int
    """Bytes of the slices and checkpoints in the range."""
    transactions: int
    """``ExecuteTransform`` blocks in the range."""
    input_ids: tuple[DatasetId, ...]
    """Datasets those transactions read, in order of first use."""


@dataclass(frozen=True, slots=True)
class MetadataOutcome:
    result: LayerResult
    survey: ChainSurvey | None
    """``None`` when the chain could not be walked to its ``Seed``."""
    verified: VerifiedChain | None = None
    """With ``remember``, a chain that passed: what to remember of it (``None``: nothing new)."""


def block_file(hash: Multihash) -> str:
    return f"blocks/{object_name(hash)}"


async def check_metadata(
    dataset: Dataset,
    request: RangeRequest,
    name: str,
    progress: Progress,
    *,
    remember: bool = False,
    known: VerifiedChain | None = None,
) -> MetadataOutcome:
    """Runs layer 1 on ``dataset``; ``VerifyUsageError`` if ``request`` names no block of it.

    ``remember`` and ``known`` apply to whole-chain requests on local block files only."""
    path_of: Callable[[Multihash], Path] | None = getattr(dataset.blocks, "path_of", None)
    if not request.is_whole_chain or path_of is None:
        remember, known = False, None
    started = time.monotonic()
    recorder = LayerRecorder(Layer.METADATA)
    verified = None
    restart = False
    progress.begin(name, Layer.METADATA)
    try:
        if (
            known is not None
            and path_of is not None
            and not await asyncio.to_thread(blocks_unchanged, known.blocks, path_of)
        ):
            known = None  # an old block file changed: check everything
        walked = await _walk(
            dataset, request, name, recorder, progress, known, path_of if remember else None
        )
        if walked is not None:
            try:
                verified = await _check_rules(dataset, walked, recorder)
            except SavedStateError:
                restart = True
    finally:
        progress.end()
    if restart:
        # The remembered state no longer fits the blocks it names: start again, in full.
        return await check_metadata(dataset, request, name, progress, remember=remember)
    if walked is not None and walked.resumed is not None:
        recorder.count("unchanged", walked.resumed.sequence_number + 1)
    result = recorder.result(time.monotonic() - started)
    if result.status is not Status.OK:
        verified = None
    return MetadataOutcome(result, None if walked is None else walked.survey, verified)


class _Tally:
    """Counts the work of layers 2 and 3 in the range while walking."""

    def __init__(self) -> None:
        self.slices = self.checkpoints = self.data_bytes = self.transactions = 0
        self.input_ids: dict[DatasetId, None] = {}

    @classmethod
    def of(cls, known: VerifiedChain) -> _Tally:
        tally = cls()
        tally.slices, tally.checkpoints = known.slices, known.checkpoints
        tally.data_bytes, tally.transactions = known.data_bytes, known.transactions
        tally.input_ids = dict.fromkeys(known.input_ids)
        return tally

    def merge(self, other: _Tally) -> None:
        self.slices += other.slices
        self.checkpoints += other.checkpoints
        self.data_bytes += other.data_bytes
        self.transactions += other.transactions
        self.input_ids.update(other.input_ids)

    def add(self, block: MetadataBlock) -> None:
        event = block.event
        if not isinstance(event, (AddData, ExecuteTransform)):
            return
        if event.new_data is not None:
            self.slices += 1
            self.data_bytes += event.new_data.size
        if event.new_checkpoint is not None:
            self.checkpoints += 1
            self.data_bytes += event.new_checkpoint.size
        if isinstance(event, ExecuteTransform):
            self.transactions += 1
            for entry in event.query_inputs:
                self.input_ids[entry.dataset_id] = None


@dataclass(frozen=True, slots=True)
class _Walked:
    survey: ChainSurvey
    resumed: VerifiedChain | None
    """The memory the walk stopped at (its head is an ancestor of the current head)."""
    remember: VerifiedChain | None
    """What to remember, but its ``state`` (filled in by the rules pass): ``None`` if nothing new."""


class _StampedFiles:
    """Block files read through ``path_of``, off the event loop, each with its ``stat`` and the
    time of the read taken just before (so a file changed during the audit is seen as fresh)."""

    def __init__(self, path_of: Callable[[Multihash], Path]) -> None:
        self._path_of = path_of
        self.read: dict[Multihash, tuple[os.stat_result, int]] = {}

    async def get_bytes(self, hash: Multihash) -> bytes:
        read_at = now_ns()
        try:
            data, stat = await asyncio.to_thread(_read_with_stat, self._path_of(hash))
        except FileNotFoundError:
            raise ObjectNotFoundError("blocks", hash) from None
        self.read[hash] = (stat, read_at)
        return data


def _read_with_stat(path: Path) -> tuple[bytes, os.stat_result]:
    with path.open("rb") as file:
        return file.read(), os.fstat(file.fileno())


def _finding(fault: ChainFault) -> Finding:
    """A fault of the chain reader as this layer reports it: against the block file at fault,
    numbered as its child says it must be."""
    child = fault.child
    here = BlockLocation(
        None if child is None or child.sequence_number is None else child.sequence_number - 1,
        fault.hash,
    )
    file = block_file(fault.hash)
    match fault:
        case MissingBlock():
            named_by = HEAD_FILE if child is None else f"prevBlockHash of {_location(child)}"
            return Finding(
                Status.FAILED,
                "missing-block",
                f"{named_by} names block {fault.hash}, which is not stored",
                block=here,
                file=file,
                field=None if child is None else "prevBlockHash",
            )
        case HashMismatch():
            return Finding(
                Status.FAILED,
                "block-hash",
                f"the block file's {fault.size} bytes hash to {fault.actual}, not to its name",
                block=here,
                file=file,
                expected=str(fault.hash),
                actual=str(fault.actual),
            )
        case MalformedBlock():
            return Finding(Status.FAILED, "block-malformed", fault.reason, block=here, file=file)
        case BrokenSequence() if child is not None:
            return Finding(
                Status.FAILED,
                "sequence-number",
                f"sequenceNumber is {fault.sequence_number}, but the block is the previous "
                f"block of {_location(child)}: sequence numbers must decrease walking back",
                block=BlockLocation(fault.sequence_number, fault.hash),
                file=file,
            )
    return Finding(Status.FAILED, "chain", f"the chain does not link at block {fault.hash}")


def _location(position: BlockPosition) -> BlockLocation:
    return BlockLocation(position.sequence_number, position.hash)


async def _walk(
    dataset: Dataset,
    request: RangeRequest,
    name: str,
    recorder: LayerRecorder,
    progress: Progress,
    known: VerifiedChain | None,
    path_of: Callable[[Multihash], Path] | None,
) -> _Walked | None:
    """Back from ``head`` to the ``Seed``, or to ``known``'s head if it is an ancestor, through
    the chain reader. With ``path_of`` each block file is stamped; blocks too fresh to stamp (see
    ``RACY_NS``) and all blocks after them are left out of what is remembered, so the next audit
    reads them again."""
    try:
        head = await dataset.chain.head()
    except CorruptRefError as err:
        recorder.add(Finding(Status.FAILED, "head-ref", str(err), file=HEAD_FILE))
        return None
    if head is None:
        recorder.add(
            Finding(
                Status.FAILED,
                "head-ref",
                f"{HEAD_FILE} is missing: the dataset has no blocks",
                file=HEAD_FILE,
            )
        )
        return None
    resolver = RangeResolver(request, name)
    tally = _Tally()
    """Blocks in the range older than any too fresh to stamp (all of them without ``path_of``)."""
    fresh = _Tally()
    """Blocks too fresh to stamp and every block after them."""
    stamps: list[BlockStamp] = []
    cut: MetadataBlock | None = None
    """The oldest block too fresh to stamp."""
    head_location: BlockLocation | None = None
    kind: DatasetKind | None = None
    files = None if path_of is None else _StampedFiles(path_of)
    source: BlockSource = dataset.blocks if files is None else files
    stop_at = None if known is None else known.head
    resumed = known if head == stop_at else None
    async with aclosing(read_back(source, head, stop_at=stop_at)) as items:
        async for item in items:
            if isinstance(item, ChainFault):
                recorder.add(_finding(item))
                return None
            block = item.block
            recorder.count("blocks")
            progress.advance(blocks=1)
            here = BlockLocation(block.sequence_number, item.hash)
            head_location = head_location or here
            stamped = None if files is None else files.read.pop(item.hash)
            if resolver.observe(block.sequence_number, item.hash):
                if stamped is not None and stamped[0].st_mtime_ns >= stamped[1] - RACY_NS:
                    fresh.merge(tally)
                    fresh.add(block)
                    tally, stamps, cut = _Tally(), [], block
                else:
                    tally.add(block)
                    if stamped is not None:
                        stamps.append(BlockStamp.of(item.hash, stamped[0]))
            if isinstance(block.event, Seed):
                kind = block.event.dataset_kind
            if block.prev_block_hash is not None and block.prev_block_hash == stop_at:
                resumed = known
    if resumed is not None:
        kind = resumed.kind
        head_location = head_location or BlockLocation(resumed.sequence_number, resumed.head)
        block_range = BlockRange(BlockLocation(0, resumed.seed), head_location)
        tally.merge(_Tally.of(resumed))
        stamps = [*resumed.blocks, *stamps]
    else:
        block_range = resolver.resolve()
    assert head_location is not None  # the loop ran at least once, or resumed
    remember = None
    if path_of is not None:
        remember = _to_remember(head_location, block_range, kind, cut, tally, stamps, resumed)
    tally.merge(fresh)
    survey = ChainSurvey(
        head=head_location,
        kind=kind,
        block_range=block_range,
        slices=tally.slices,
        checkpoints=tally.checkpoints,
        data_bytes=tally.data_bytes,
        transactions=tally.transactions,
        input_ids=tuple(tally.input_ids),
    )
    return _Walked(survey, resumed, remember)


def _to_remember(
    head: BlockLocation,
    block_range: BlockRange,
    kind: DatasetKind | None,
    cut: MetadataBlock | None,
    tally: _Tally,
    stamps: list[BlockStamp],
    resumed: VerifiedChain | None,
) -> VerifiedChain | None:
    """The newest block with every block up to it stamped (its state comes later)."""
    if cut is None:
        at = head
    elif cut.prev_block_hash is None:
        return None  # even the Seed is too fresh
    else:
        at = BlockLocation(cut.sequence_number - 1, cut.prev_block_hash)
    # Every location here comes from a decoded block: both parts are set.
    assert at.sequence_number is not None and at.hash is not None
    assert block_range.first.hash is not None
    if resumed is not None and at.sequence_number <= resumed.sequence_number:
        return None  # nothing verified beyond what is remembered
    return VerifiedChain(
        head=at.hash,
        sequence_number=at.sequence_number,
        seed=block_range.first.hash,
        kind=kind,
        slices=tally.slices,
        checkpoints=tally.checkpoints,
        data_bytes=tally.data_bytes,
        transactions=tally.transactions,
        input_ids=tuple(tally.input_ids),
        state=b"",
        blocks=tuple(stamps),
    )


async def _check_rules(
    dataset: Dataset, walked: _Walked, recorder: LayerRecorder
) -> VerifiedChain | None:
    """Applies the rules to every block after the remembered head (from the ``Seed`` without
    one); returns ``walked.remember`` with the state at its head, if the rules hold.
    ``SavedStateError`` if the remembered state does not fit its blocks."""
    remember = walked.remember
    try:
        if walked.resumed is None:
            state, after = ChainState(dataset.id), frozenset[Multihash]()
        else:
            saved = SavedState.from_bytes(walked.resumed.state)
            if saved.head != walked.resumed.head or saved.dataset_id != dataset.id:
                raise SavedStateError("the remembered state is not of the remembered head")
            state, after = await saved.restore(dataset.chain.get_block), frozenset([saved.head])
        state_bytes = b""
        async for hash, block in dataset.chain.iter_blocks_forward(
            walked.survey.head.hash, after=after
        ):
            state.apply(hash, block)
            if remember is not None and hash == remember.head:
                state_bytes = SavedState.of(state).to_bytes()
        if remember is not None and state_bytes:
            return dataclasses.replace(remember, state=state_bytes)
    except ChainRuleError as err:
        location = BlockLocation(err.sequence_number, err.block_hash)
        recorder.add(
            Finding(
                Status.FAILED,
                err.rule,
                _rule_message(err),
                block=location,
                file=None if err.block_hash is None else block_file(err.block_hash),
            )
        )
    except SavedStateError:
        raise
    except (StorageError, DecodeError) as err:
        recorder.add(Finding(Status.FAILED, "chain", str(err)))
    return None


def _rule_message(err: ChainRuleError) -> str:
    """The rule's own message, without the block prefix the finding shows separately."""
    where = "block"
    if err.sequence_number is not None:
        where += f" #{err.sequence_number}"
    if err.block_hash is not None:
        where += f" {err.block_hash}"
    return str(err).removeprefix(f"{where} breaks rule [{err.rule}]: ")
