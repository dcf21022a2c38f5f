"""Builds metadata chains block by block for tests: hashes, links and sequence numbers."""

from __future__ import annotations

import dataclasses
import hashlib

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
        new_data=None if start is None else data_slice(start, end),  # type: ignore[arg-type]
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
        new_data=None if start is None else data_slice(start, end),  # type: ignore[arg-type]
        new_watermark=watermark,
    )


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
        self, event: MetadataEvent, **overrides: object
    ) -> tuple[Multihash, MetadataBlock]:
        """The block that would follow the chain, with any field overridden."""
        block = MetadataBlock(
            system_time=Timestamp(T0.epoch_nanos + len(self.blocks) * 1_000_000_000),
            prev_block_hash=self.blocks[-1][0] if self.blocks else None,
            sequence_number=len(self.blocks),
            event=event,
        )
        block = dataclasses.replace(block, **overrides)  # type: ignore[arg-type]
        return hash_block(block)[0], block

    def add(self, event: MetadataEvent, **overrides: object) -> Multihash:
        item = self.next_block(event, **overrides)
        self.blocks.append(item)
        return item[0]
