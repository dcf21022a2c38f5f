"""Builds metadata chains block by block for tests: hashes, links and sequence numbers."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TypedDict, Unpack

from protocol.codec.flatbuffers import hash_block
from protocol.identity import DatasetId, DatasetRef, Multicodec, Multihash
from protocol.model import (
    AddData,
    Checkpoint,
    DataField,
    DataSchema,
    DatasetKind,
    DataSlice,
    DataTypeInt64,
    DataTypeString,
    DataTypeTimestamp,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    MetadataEvent,
    OffsetInterval,
    Seed,
    SetDataSchema,
    SetTransform,
    SqlQueryStep,
    Timestamp,
    TransformInput,
    TransformSql,
)

T0 = Timestamp.of(2024, 1, 1)


def fake_hash(label: str, code: Multicodec = Multicodec.SHA3_256) -> Multihash:
    return Multihash(code=code, digest=hashlib.sha3_256(label.encode()).digest())


def schema(*names: str) -> SetDataSchema:
    fields = [
        DataField(name="offset", type=DataTypeInt64()),
        DataField(name="system_time", type=DataTypeTimestamp()),
        DataField(name="event_time", type=DataTypeTimestamp()),
    ] + [DataField(name=n, type=DataTypeString()) for n in names]
    return SetDataSchema(schema=DataSchema(fields=tuple(fields)))


def data_slice(start: int, end: int, label: str = "") -> DataSlice:
    return DataSlice(
        logical_hash=fake_hash(f"logical{start}-{end}{label}", Multicodec.ARROW0_SHA3_256),
        physical_hash=fake_hash(f"physical{start}-{end}{label}"),
        offset_interval=OffsetInterval(start=start, end=end),
        size=100 + end,
    )


def _slice(start: int | None, end: int | None) -> DataSlice | None:
    """The slice of offsets ``start`` to ``end``, if the event has data."""
    if start is None:
        return None
    assert end is not None, "a slice needs its last offset too"
    return data_slice(start, end)


def add_data(
    prev_offset: int | None,
    start: int | None = None,
    end: int | None = None,
    *,
    watermark: Timestamp | None = None,
    prev_checkpoint: Multihash | None = None,
    checkpoint: Checkpoint | None = None,
) -> AddData:
    return AddData(
        prev_offset=prev_offset,
        new_data=_slice(start, end),
        prev_checkpoint=prev_checkpoint,
        new_checkpoint=checkpoint,
        new_watermark=watermark,
    )


def set_transform(*inputs: DatasetId) -> SetTransform:
    return SetTransform(
        inputs=tuple(
            TransformInput(dataset_ref=DatasetRef(i), alias=f"in{n}") for n, i in enumerate(inputs)
        ),
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query="select * from in0"),)),
    )


def execute(
    *inputs: ExecuteTransformInput,
    prev_offset: int | None = None,
    start: int | None = None,
    end: int | None = None,
    watermark: Timestamp | None = None,
) -> ExecuteTransform:
    return ExecuteTransform(
        query_inputs=tuple(inputs),
        prev_offset=prev_offset,
        new_data=_slice(start, end),
        new_watermark=watermark,
    )


class BlockOverrides(TypedDict, total=False):
    """Fields of a block set by hand instead of the ones that would continue the chain."""

    system_time: Timestamp
    prev_block_hash: Multihash | None
    sequence_number: int


class ChainBuilder:
    """Appends events as correctly linked blocks; tests then break one block on purpose."""

    def __init__(self, kind: DatasetKind = DatasetKind.ROOT) -> None:
        _, self.dataset_id = DatasetId.new_generated()
        self.blocks: list[tuple[Multihash, MetadataBlock]] = []
        self.add(Seed(dataset_id=self.dataset_id, dataset_kind=kind))

    @property
    def head(self) -> Multihash:
        return self.blocks[-1][0]

    def next_block(
        self, event: MetadataEvent, **overrides: Unpack[BlockOverrides]
    ) -> tuple[Multihash, MetadataBlock]:
        """The block that would follow the chain, with any field overridden."""
        block = MetadataBlock(
            system_time=Timestamp(T0.epoch_nanos + len(self.blocks) * 1_000_000_000),
            prev_block_hash=self.blocks[-1][0] if self.blocks else None,
            sequence_number=len(self.blocks),
            event=event,
        )
        block = dataclasses.replace(block, **overrides)
        return hash_block(block)[0], block

    def add(self, event: MetadataEvent, **overrides: Unpack[BlockOverrides]) -> Multihash:
        item = self.next_block(event, **overrides)
        self.blocks.append(item)
        return item[0]
