"""Compacting a dataset: its history rewritten with runs of small data slices merged into one.

Like the reference's hard compaction, this rewrites history: consecutive ``AddData`` blocks with
data are merged while the merged slice stays within ``max_slice_size`` bytes and
``max_slice_records`` records; every other block is kept as it was (same event and system time)
and re-linked. A merged block carries the first block's ``prevOffset``/``prevCheckpoint`` and the
last block's checkpoint, watermark and source state, so the chain's state after it is the state
after the run it replaces; its slice holds the same records, in offset order, with their offsets
and system times. Derivative datasets are refused: their slices are transform results that
``odfd verify`` re-executes transaction by transaction. ``keep_metadata_only`` drops every data
block instead (any kind of dataset): a derivative is then recomputed from its inputs on its next
pull, which is how readers of a compacted dataset follow its new history.

Nothing is deleted here: the old blocks and slices stay in the dataset's stores, unreferenced;
``odfd system gc`` removes the old slices once they are old enough. Head moves last, by compare-and-swap, after every merged slice is stored and
read back against the records it replaces and the whole new chain passed the chain rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from odfd.coordinator.commit import transaction_dir
from odfd.errors import OdfdError
from protocol.codec.flatbuffers import hash_block
from protocol.hashing import FileDigest, logical_hash_parquet, physical_hash_file
from protocol.identity import Multihash
from protocol.model import (
    AddData,
    DatasetKind,
    DataSlice,
    ExecuteTransform,
    MetadataBlock,
    OffsetInterval,
)
from storage.dataset import Dataset
from storage.dataset_storage import local_file
from verifier.engine.columns import Vocab
from verifier.engine.output import ROW_GROUP_ROWS, open_slice_writer

DEFAULT_MAX_SLICE_SIZE = 300_000_000
"""Bytes of a merged slice at most (the reference's default)."""

DEFAULT_MAX_SLICE_RECORDS = 10_000
"""Records of a merged slice at most (the reference's default)."""


class CompactionError(OdfdError):
    """A dataset cannot be compacted as asked; nothing was changed."""


class NothingToCompactError(CompactionError):
    """No run of slices to merge (or, with ``keep_metadata_only``, no data to drop)."""


@dataclass(frozen=True, slots=True)
class CompactionOptions:
    max_slice_size: int = DEFAULT_MAX_SLICE_SIZE
    max_slice_records: int = DEFAULT_MAX_SLICE_RECORDS
    keep_metadata_only: bool = False


@dataclass(slots=True)
class _Run:
    """Consecutive ``AddData`` blocks whose slices become one."""

    blocks: list[MetadataBlock] = field(default_factory=list)
    size: int = 0
    records: int = 0

    def add(self, block: MetadataBlock, event: AddData) -> None:
        assert event.new_data is not None  # only blocks with data join a run
        interval = event.new_data.offset_interval
        self.blocks.append(block)
        self.size += event.new_data.size
        self.records += interval.end - interval.start + 1


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The new history: each item a block kept as it was or a run to merge."""

    old_head: Multihash
    old_blocks: int
    offset_column: str
    items: tuple[MetadataBlock | _Run, ...]
    dropped_blocks: int

    @property
    def merged_runs(self) -> int:
        return sum(isinstance(i, _Run) for i in self.items)

    @property
    def merged_slices(self) -> int:
        return sum(len(i.blocks) for i in self.items if isinstance(i, _Run))

    @property
    def new_blocks(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    old_head: Multihash
    new_head: Multihash
    old_blocks: int
    new_blocks: int


async def plan_compaction(
    dataset: Dataset, alias: str, options: CompactionOptions
) -> CompactionPlan:
    """What compacting ``dataset`` would do; ``CompactionError`` when it may not be compacted."""
    if options.max_slice_size < 1 or options.max_slice_records < 1:
        raise CompactionError("--max-slice-size and --max-slice-records must be at least 1")
    state = await dataset.chain.state()
    if state.head is None:
        raise CompactionError(f"dataset {alias} has no blocks")
    if state.kind == DatasetKind.DERIVATIVE and not options.keep_metadata_only:
        raise CompactionError(
            f"{alias} is a derivative dataset: its slices are the results of its transform, "
            "which `odfd verify` re-executes transaction by transaction, so they cannot be "
            "merged; compact its root inputs, or pass --keep-metadata-only to drop its data "
            "and recompute it on the next pull"
        )
    items: list[MetadataBlock | _Run] = []
    run = _Run()
    dropped = 0
    old_blocks = 0

    def close_run() -> None:
        nonlocal run
        if len(run.blocks) == 1:
            items.append(run.blocks[0])
        elif run.blocks:
            items.append(run)
        run = _Run()

    async for _, block in dataset.chain.iter_blocks_forward(state.head):
        old_blocks += 1
        event = block.event
        if options.keep_metadata_only and isinstance(event, (AddData, ExecuteTransform)):
            dropped += 1
            continue
        if isinstance(event, AddData) and event.new_data is not None:
            data = event.new_data
            records = data.offset_interval.end - data.offset_interval.start + 1
            if run.blocks and (
                run.size + data.size > options.max_slice_size
                or run.records + records > options.max_slice_records
            ):
                close_run()
            run.add(block, event)
            continue
        close_run()
        items.append(block)
    close_run()
    plan = CompactionPlan(
        state.head, old_blocks, Vocab.of(state.vocab).offset, tuple(items), dropped
    )
    if plan.merged_runs == 0 and dropped == 0:
        what = "data blocks to drop" if options.keep_metadata_only else "consecutive slices"
        limits = (
            ""
            if options.keep_metadata_only
            else f" within {options.max_slice_size} bytes and {options.max_slice_records} records"
        )
        raise NothingToCompactError(f"nothing to compact: {alias} has no {what}{limits}")
    return plan


async def execute_compaction(
    workspace_root: Path, dataset: Dataset, plan: CompactionPlan
) -> CompactionResult:
    """Merge the plan's runs, store the slices, then replace the history (head moves last)."""
    async with transaction_dir(workspace_root) as work:
        merged: dict[int, MetadataBlock] = {}
        for index, item in enumerate(plan.items):
            if isinstance(item, _Run):
                out = work / f"merged-{index}.parquet"
                sources = await _run_sources(dataset, item)
                new_data = await asyncio.to_thread(_merge_run, sources, out, plan.offset_column)
                await dataset.data.put_file(out, expected=new_data.physical_hash, move=True)
                merged[index] = _merged_block(item, new_data)
        blocks: list[MetadataBlock] = []
        prev: Multihash | None = None
        for index, item in enumerate(plan.items):
            source = merged[index] if isinstance(item, _Run) else item
            block = MetadataBlock(
                system_time=source.system_time,
                prev_block_hash=prev,
                sequence_number=len(blocks),
                event=source.event,
            )
            prev = hash_block(block)[0]
            blocks.append(block)
        new_head = await dataset.chain.replace_history(blocks, expected_head=plan.old_head)
    return CompactionResult(plan.old_head, new_head, plan.old_blocks, len(blocks))


def _merged_block(run: _Run, new_data: DataSlice) -> MetadataBlock:
    """The block replacing ``run``: its slice, the state before the first and after the last."""
    first, last = run.blocks[0].event, run.blocks[-1].event
    assert isinstance(first, AddData) and isinstance(last, AddData)
    event = AddData(
        prev_checkpoint=first.prev_checkpoint,
        prev_offset=first.prev_offset,
        new_data=new_data,
        new_checkpoint=last.new_checkpoint,
        new_watermark=last.new_watermark,
        new_source_state=last.new_source_state,
    )
    return MetadataBlock(
        system_time=run.blocks[-1].system_time,
        prev_block_hash=None,
        sequence_number=0,
        event=event,
    )


async def _run_sources(dataset: Dataset, run: _Run) -> list[tuple[Path, OffsetInterval]]:
    """The local file and offsets of each slice of the run, in order."""
    sources: list[tuple[Path, OffsetInterval]] = []
    for block in run.blocks:
        assert isinstance(block.event, AddData) and block.event.new_data is not None
        data = block.event.new_data
        sources.append((await local_file(dataset.data, data.physical_hash), data.offset_interval))
    return sources


def _merge_run(
    sources: list[tuple[Path, OffsetInterval]], out: Path, offset_column: str
) -> DataSlice:
    """Write the run's slices, in order, as one file; read it back against what was written."""
    schema = pq.read_schema(sources[0][0])
    digest = FileDigest(schema)
    writer = open_slice_writer(out, schema)
    try:
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in _source_batches(sources, schema, offset_column):
            digest.update(batch)
            pending.append(batch)
            rows += batch.num_rows
            if rows >= ROW_GROUP_ROWS:
                writer.write_table(pa.Table.from_batches(pending, schema))
                pending, rows = [], 0
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema))
    finally:
        writer.close()
    logical = digest.finalize()
    if logical_hash_parquet(out) != logical:
        raise CompactionError(f"the merged slice {out} does not read back as written")
    interval = OffsetInterval(start=sources[0][1].start, end=sources[-1][1].end)
    return DataSlice(
        logical_hash=logical,
        physical_hash=physical_hash_file(out),
        offset_interval=interval,
        size=out.stat().st_size,
    )


def _source_batches(
    sources: Sequence[tuple[Path, OffsetInterval]], schema: pa.Schema, offset_column: str
) -> Iterator[pa.RecordBatch]:
    """The slices' batches in order, each slice checked against its block's offsets and the
    first slice's schema (a slice that does not match is a damaged dataset: verify it)."""
    for path, interval in sources:
        file = pq.ParquetFile(path)
        if not file.schema_arrow.equals(schema):
            raise CompactionError(
                f"slice {path.name} has another schema than {sources[0][0].name} of the same "
                "run; nothing was changed"
            )
        expected = interval.start
        for batch in file.iter_batches():
            offsets = batch.column(offset_column).to_numpy()
            if len(offsets) and (offsets[0] != expected or np.any(np.diff(offsets) != 1)):
                raise CompactionError(
                    f"slice {path.name} does not hold offsets {interval.start}..{interval.end} "
                    "as its block records; run `odfd verify`; nothing was changed"
                )
            expected += len(offsets)
            yield batch
        if expected != interval.end + 1:
            raise CompactionError(
                f"slice {path.name} holds {expected - interval.start} records, its block "
                f"records {interval.end - interval.start + 1}; run `odfd verify`; nothing was "
                "changed"
            )
