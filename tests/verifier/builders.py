"""Datasets built with the storage API directly (no Spark), and the tools an attacker would use.

Slices are written by pyarrow with the columns our pipeline writes (``offset`` int64, ``op``
int32, ``system_time`` and ``event_time`` as UTC milliseconds), hashed with the protocol's
hashes and committed as ``AddData``/``ExecuteTransform`` blocks, so every layer-1/2 check sees
what a real dataset holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from protocol import arrow_schema
from protocol.codec.flatbuffers import hash_block
from protocol.hashing import logical_hash, physical_hash_file
from protocol.identity import DatasetRef, Multihash
from protocol.model import (
    AddData,
    Checkpoint,
    DatasetKind,
    DataSlice,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    MetadataEvent,
    OffsetInterval,
    SetDataSchema,
    SetTransform,
    SqlQueryStep,
    Timestamp,
    TransformInput,
    TransformSql,
)
from storage.dataset import Dataset
from storage.layout import HEAD_REF
from storage.workspace import Workspace

T0 = Timestamp.of(2024, 1, 1)
MS = pa.timestamp("ms", tz="UTC")

DOUBLED_SNAPSHOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: doubled
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: nums
      transform:
        kind: Sql
        engine: datafusion
        query: SELECT event_time, value * 2 AS doubled FROM nums
"""
"""A DataFusion derivative of a ``root_with_slices`` dataset named ``nums``."""


def slice_table(
    start: int,
    values: Sequence[int],
    *,
    system_time: Timestamp = T0,
    ops: Sequence[int] | None = None,
) -> pa.Table:
    """Records ``start..`` with one data column ``value``; event time = value seconds after T0."""
    n = len(values)
    return pa.table(
        {
            "offset": pa.array(range(start, start + n), pa.int64()),
            "op": pa.array(ops if ops is not None else [0] * n, pa.int32()),
            "system_time": pa.array([system_time.epoch_millis] * n, pa.int64()).cast(MS),
            "event_time": pa.array([T0.epoch_millis + v * 1000 for v in values], pa.int64()).cast(
                MS
            ),
            "value": pa.array(values, pa.int64()),
        }
    )


def write_slice(table: pa.Table, path: Path, *, row_group_size: int | None = None) -> DataSlice:
    """Writes ``table`` as a Parquet slice and describes it as a block would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    offsets = table.column("offset")
    return DataSlice(
        logical_hash=logical_hash(table),
        physical_hash=physical_hash_file(path),
        offset_interval=OffsetInterval(start=offsets[0].as_py(), end=offsets[-1].as_py()),
        size=path.stat().st_size,
    )


def schema_event(table: pa.Table) -> SetDataSchema:
    return SetDataSchema(
        schema=arrow_schema.strip_encoding(arrow_schema.schema_from_arrow(table.schema))
    )


async def root_with_slices(
    workspace: Workspace,
    alias: str,
    slices: Sequence[Sequence[int]],
    *,
    checkpoints: bool = False,
    row_group_size: int | None = None,
) -> Dataset:
    """A root dataset with one ``AddData`` per entry of ``slices`` (the values of its records)."""
    dataset = await workspace.create_dataset(alias, DatasetKind.ROOT, system_time=T0)
    staging = workspace.root / "staging"
    offset = 0
    for n, values in enumerate(slices):
        state = await dataset.chain.state()
        time = Timestamp(T0.epoch_nanos + (n + 1) * 60_000_000_000)
        table = slice_table(offset, values, system_time=time)
        data_slice = write_slice(
            table, staging / f"{alias}-{n}.parquet", row_group_size=row_group_size
        )
        checkpoint = None
        checkpoint_path = None
        if checkpoints:
            checkpoint_path = staging / f"{alias}-{n}.checkpoint"
            checkpoint_path.write_bytes(f"checkpoint of slice {n}\n".encode() * 50)
            checkpoint = Checkpoint(
                physical_hash=physical_hash_file(checkpoint_path),
                size=checkpoint_path.stat().st_size,
            )
        if state.schema is None:
            await dataset.commit_event(
                schema_event(table), expected_head=state.head, system_time=time
            )
            state = await dataset.chain.state()
        event = AddData(
            prev_checkpoint=state.last_checkpoint,
            prev_offset=state.last_offset,
            new_data=data_slice,
            new_checkpoint=checkpoint,
            new_watermark=Timestamp(T0.epoch_nanos + max(values) * 1_000_000_000),
        )
        await dataset.commit_data(
            event,
            data_file=staging / f"{alias}-{n}.parquet",
            checkpoint_file=checkpoint_path,
            expected_head=state.head,
            system_time=time,
        )
        offset += len(values)
    return dataset


async def root_with_table(
    workspace: Workspace,
    alias: str,
    table: pa.Table,
    *,
    events: Sequence[MetadataEvent] = (),
    system_time: Timestamp = T0,
    row_group_size: int | None = None,
) -> Dataset:
    """A root dataset holding ``table`` as one slice, after ``events`` and its schema."""
    dataset = await workspace.create_dataset(
        alias, DatasetKind.ROOT, [*events, schema_event(table)], system_time=system_time
    )
    path = workspace.root / "staging" / f"{alias.replace('/', '-')}.parquet"
    data_slice = write_slice(table, path, row_group_size=row_group_size)
    state = await dataset.chain.state()
    await dataset.commit_data(
        AddData(prev_offset=state.last_offset, new_data=data_slice),
        data_file=path,
        expected_head=state.head,
        system_time=system_time,
    )
    return dataset


async def derivative_with_engine(
    workspace: Workspace,
    alias: str,
    source: Dataset,
    engine: str,
    query: str = "SELECT event_time, value FROM src",
) -> Dataset:
    """A derivative of ``source`` whose transform runs ``query`` in ``engine``, with one
    transaction over all of ``source``'s data (its slice copies the source's records)."""
    source_state = await source.chain.state()
    assert source.id is not None and source_state.last_offset is not None
    transform = SetTransform(
        inputs=(TransformInput(dataset_ref=DatasetRef(source.id), alias="src"),),
        transform=TransformSql(engine=engine, queries=(SqlQueryStep(query=query),)),
    )
    dataset = await workspace.create_dataset(
        alias, DatasetKind.DERIVATIVE, [transform], system_time=T0
    )
    values = list(range(source_state.last_offset + 1))
    time = Timestamp(T0.epoch_nanos + 3600 * 1_000_000_000)
    table = slice_table(0, values, system_time=time)
    path = workspace.root / "staging" / f"{alias}.parquet"
    data_slice = write_slice(table, path)
    state = await dataset.chain.state()
    await dataset.commit_event(schema_event(table), expected_head=state.head, system_time=time)
    event = ExecuteTransform(
        query_inputs=(
            ExecuteTransformInput(
                dataset_id=source.id,
                new_block_hash=source_state.head,
                new_offset=source_state.last_offset,
            ),
        ),
        new_data=data_slice,
        new_watermark=source_state.last_watermark,
    )
    await dataset.commit_data(
        event, data_file=path, expected_head=await dataset.chain.head(), system_time=time
    )
    return dataset


# --- tampering --------------------------------------------------------------------------------


async def blocks_oldest_first(dataset: Dataset) -> list[tuple[Multihash, MetadataBlock]]:
    return [item async for item in dataset.chain.iter_blocks()][::-1]


async def data_blocks(dataset: Dataset) -> list[tuple[Multihash, MetadataBlock]]:
    return [
        (h, b)
        for h, b in await blocks_oldest_first(dataset)
        if isinstance(b.event, (AddData, ExecuteTransform))
    ]


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


async def rewrite_chain(dataset: Dataset, replace: dict[int, MetadataBlock]) -> list[Multihash]:
    """Replaces the blocks at the given sequence numbers and re-links every later block, storing
    each under its new hash and moving ``head`` — what an attacker without the data would do.
    Returns the new hashes, oldest first."""
    blocks = await blocks_oldest_first(dataset)
    new_hashes: list[Multihash] = []
    prev: Multihash | None = None
    for _, block in blocks:
        block = replace.get(block.sequence_number, block)
        block = dataclasses.replace(block, prev_block_hash=prev)
        new_hash, data = hash_block(block)
        await dataset.blocks.put_bytes(data, expected=new_hash)
        new_hashes.append(new_hash)
        prev = new_hash
    head_file = dataset.layout.refs_dir / HEAD_REF
    head_file.write_text(str(prev))
    return new_hashes
