"""Layer 1, metadata integrity: every block hashes to its name, the links reach the ``Seed``
unbroken, and every chain rule holds.

Two passes. The first walks back from ``head`` reading raw block files, so a missing, truncated
or edited block is reported by its name and the sequence number it must have (its child's minus
one) before anything trusts its content; on the way it sizes the work of the other layers. The
second is ``storage.chain.validate_chain``, the same rules every append obeys, oldest block first.
Memory stays bounded however long the chain is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from protocol.codec.flatbuffers import block_hash, decode_block
from protocol.errors import DecodeError
from protocol.identity import DatasetId, Multihash
from protocol.model import AddData, DatasetKind, ExecuteTransform, MetadataBlock, Seed
from storage.chain import validate_chain
from storage.dataset import Dataset
from storage.errors import ChainRuleError, CorruptRefError, ObjectNotFoundError, StorageError
from storage.layout import HEAD_REF, object_name
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


def block_file(hash: Multihash) -> str:
    return f"blocks/{object_name(hash)}"


async def check_metadata(
    dataset: Dataset, request: RangeRequest, name: str, progress: Progress
) -> MetadataOutcome:
    """Runs layer 1 on ``dataset``; ``VerifyUsageError`` if ``request`` names no block of it."""
    started = time.monotonic()
    recorder = LayerRecorder(Layer.METADATA)
    progress.begin(name, Layer.METADATA)
    try:
        survey = await _walk(dataset, request, name, recorder, progress)
        if survey is not None:
            await _check_rules(dataset, survey.head, recorder)
    finally:
        progress.end()
    return MetadataOutcome(recorder.result(time.monotonic() - started), survey)


class _Tally:
    """Counts the work of layers 2 and 3 in the range while walking."""

    def __init__(self) -> None:
        self.slices = self.checkpoints = self.data_bytes = self.transactions = 0
        self.input_ids: dict[DatasetId, None] = {}

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


async def _walk(
    dataset: Dataset, request: RangeRequest, name: str, recorder: LayerRecorder, progress: Progress
) -> ChainSurvey | None:
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
    child: BlockLocation | None = None
    head_location: BlockLocation | None = None
    kind: DatasetKind | None = None
    hash: Multihash | None = head
    while hash is not None:
        expected_number = None if child is None else child.sequence_number - 1  # type: ignore[operator]  # blocks decoded here always carry a sequence number
        here = BlockLocation(expected_number, hash)
        try:
            data = await dataset.blocks.get_bytes(hash)
        except ObjectNotFoundError:
            named_by = f"{HEAD_FILE}" if child is None else f"prevBlockHash of {child}"
            recorder.add(
                Finding(
                    Status.FAILED,
                    "missing-block",
                    f"{named_by} names block {hash}, which is not stored",
                    block=here,
                    file=block_file(hash),
                    field=None if child is None else "prevBlockHash",
                )
            )
            return None
        actual = block_hash(data)
        if actual != hash:
            recorder.add(
                Finding(
                    Status.FAILED,
                    "block-hash",
                    f"the block file's {len(data)} bytes hash to {actual}, not to its name",
                    block=here,
                    file=block_file(hash),
                    expected=str(hash),
                    actual=str(actual),
                )
            )
            return None
        try:
            block = decode_block(data)
        except DecodeError as err:
            recorder.add(
                Finding(
                    Status.FAILED, "block-malformed", str(err), block=here, file=block_file(hash)
                )
            )
            return None
        recorder.count("blocks")
        progress.advance(blocks=1)
        here = BlockLocation(block.sequence_number, hash)
        head_location = head_location or here
        if resolver.observe(block.sequence_number, hash):
            tally.add(block)
        if isinstance(block.event, Seed):
            kind = block.event.dataset_kind
        child = here
        hash = block.prev_block_hash
    assert head_location is not None  # the loop ran at least once
    return ChainSurvey(
        head=head_location,
        kind=kind,
        block_range=resolver.resolve(),
        slices=tally.slices,
        checkpoints=tally.checkpoints,
        data_bytes=tally.data_bytes,
        transactions=tally.transactions,
        input_ids=tuple(tally.input_ids),
    )


async def _check_rules(dataset: Dataset, head: BlockLocation, recorder: LayerRecorder) -> None:
    try:
        await validate_chain(dataset.chain, head.hash, dataset_id=dataset.id)
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
    except (StorageError, DecodeError) as err:
        recorder.add(Finding(Status.FAILED, "chain", str(err)))


def _rule_message(err: ChainRuleError) -> str:
    """The rule's own message, without the block prefix the finding shows separately."""
    where = "block"
    if err.sequence_number is not None:
        where += f" #{err.sequence_number}"
    if err.block_hash is not None:
        where += f" {err.block_hash}"
    return str(err).removeprefix(f"{where} breaks rule [{err.rule}]: ")
