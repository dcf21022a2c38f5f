"""Datasets for replication tests and the sync benchmark: real Parquet slices with their real
logical and physical hashes, checkpoints, and watermark-only blocks, committed through the
storage API so every chain rule holds; plus an independent integrity check of a dataset."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from protocol.hashing import logical_hash, logical_hash_parquet, physical_hash_bytes
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    Checkpoint,
    DataField,
    DataSchema,
    DatasetKind,
    DataSlice,
    DataTypeInt32,
    DataTypeInt64,
    DataTypeString,
    DataTypeTimestamp,
    MetadataEvent,
    OffsetInterval,
    SetDataSchema,
    Timestamp,
)
from storage.chain import validate_chain
from storage.dataset import Dataset
from storage.stores.localfs import LocalFsObjectStore, hash_file
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from verifier.audit import VerifyOptions, verify

T0 = Timestamp.of(2024, 1, 1)
SCHEMA = SetDataSchema(
    schema=DataSchema(
        fields=(
            DataField(name="offset", type=DataTypeInt64()),
            DataField(name="op", type=DataTypeInt32()),
            DataField(name="system_time", type=DataTypeTimestamp()),
            DataField(name="event_time", type=DataTypeTimestamp()),
            DataField(name="value", type=DataTypeString()),
        )
    )
)


def parquet_slice(start: int, rows: int, rng: random.Random, value_bytes: int = 24) -> bytes:
    ts = pa.array(
        [T0.epoch_nanos // 1000 + i for i in range(start, start + rows)],
        pa.timestamp("us", tz="UTC"),
    )
    table = pa.table(
        {
            "offset": pa.array(range(start, start + rows), pa.int64()),
            "op": pa.array([0] * rows, pa.int32()),  # append (RFC-015)
            "system_time": ts,
            "event_time": ts,
            "value": pa.array([rng.randbytes(value_bytes).hex() for _ in range(rows)], pa.string()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="none")
    return sink.getvalue()


@dataclass
class DatasetWriter:
    """Appends slices to one root dataset, tracking offsets and watermark."""

    dataset: Dataset
    rng: random.Random
    next_offset: int = 0
    last_checkpoint: Multihash | None = None
    watermark_step: int = 0

    @property
    def dataset_id(self) -> DatasetId:
        """The dataset's id (a dataset made by ``create_root`` has one)."""
        assert self.dataset.id is not None
        return self.dataset.id

    async def events(
        self, *, slices: int, rows: int = 10, empty_blocks: int = 0, checkpoints: bool = True
    ) -> list[MetadataEvent]:
        """Store the files of ``slices`` new slices and return their events, each followed by
        ``empty_blocks`` watermark-only blocks."""
        events: list[MetadataEvent] = []
        for _ in range(slices):
            data = parquet_slice(self.next_offset, rows, self.rng)
            table = pq.read_table(io.BytesIO(data))
            data_hash = await self.dataset.data.put_bytes(data)
            checkpoint = None
            if checkpoints:
                state = self.rng.randbytes(64)
                checkpoint = Checkpoint(
                    physical_hash=await self.dataset.checkpoints.put_bytes(state), size=len(state)
                )
            self.watermark_step += 1
            events.append(
                AddData(
                    prev_checkpoint=self.last_checkpoint,
                    prev_offset=self.next_offset - 1 if self.next_offset else None,
                    new_data=DataSlice(
                        logical_hash=logical_hash(table),
                        physical_hash=data_hash,
                        offset_interval=OffsetInterval(
                            start=self.next_offset, end=self.next_offset + rows - 1
                        ),
                        size=len(data),
                    ),
                    new_checkpoint=checkpoint,
                    new_watermark=Timestamp(T0.epoch_nanos + self.watermark_step * 1_000_000_000),
                )
            )
            self.next_offset += rows
            if checkpoint is not None:
                self.last_checkpoint = checkpoint.physical_hash
            for _ in range(empty_blocks):
                self.watermark_step += 1
                events.append(
                    AddData(
                        prev_checkpoint=self.last_checkpoint,
                        prev_offset=self.next_offset - 1,
                        new_checkpoint=None
                        if self.last_checkpoint is None
                        else Checkpoint(
                            physical_hash=self.last_checkpoint,
                            size=await self.dataset.checkpoints.size(self.last_checkpoint),
                        ),
                        new_watermark=Timestamp(
                            T0.epoch_nanos + self.watermark_step * 1_000_000_000
                        ),
                    )
                )
        return events

    async def append(
        self,
        *,
        slices: int,
        rows: int = 10,
        empty_blocks: int = 0,
        batch: int = 2000,
        checkpoints: bool = True,
    ) -> Multihash:
        events = await self.events(
            slices=slices, rows=rows, empty_blocks=empty_blocks, checkpoints=checkpoints
        )
        head = await self.dataset.chain.head()
        for start in range(0, len(events), batch):
            result = await self.dataset.commit_events(
                events[start : start + batch],
                expected_head=head,
                system_time=Timestamp(T0.epoch_nanos + self.watermark_step * 1_000_000_000),
            )
            head = result.new_head
        assert head is not None
        return head


async def create_root(
    workspace: Workspace,
    alias: str,
    *,
    slices: int = 3,
    rows: int = 10,
    empty_blocks: int = 0,
    seed: int = 1,
    checkpoints: bool = True,
) -> DatasetWriter:
    dataset = await workspace.create_dataset(alias, DatasetKind.ROOT, [SCHEMA], system_time=T0)
    writer = DatasetWriter(dataset, random.Random(seed))
    if slices:
        await writer.append(
            slices=slices, rows=rows, empty_blocks=empty_blocks, checkpoints=checkpoints
        )
    return writer


async def verify_integrity(dataset: Dataset) -> int:
    """Independently check a dataset: every block re-hashed and every chain rule applied, and
    every data file's physical and logical hash and every checkpoint's physical hash recomputed
    from the bytes on disk. Returns the number of objects checked."""
    await validate_chain(
        dataset.chain, dataset_id=dataset.id, data=dataset.data, checkpoints=dataset.checkpoints
    )
    checked = 0
    async for _, block in dataset.chain.iter_blocks():
        event = block.event
        if not isinstance(event, AddData):
            continue
        if event.new_data is not None:
            assert isinstance(dataset.data, LocalFsObjectStore)
            path = dataset.data.path_of(event.new_data.physical_hash)
            assert hash_file(path) == (event.new_data.physical_hash, event.new_data.size)
            assert logical_hash_parquet(path) == event.new_data.logical_hash
            checked += 1
        if event.new_checkpoint is not None:
            data = await dataset.checkpoints.get_bytes(event.new_checkpoint.physical_hash)
            assert physical_hash_bytes(data) == event.new_checkpoint.physical_hash
            checked += 1
    return checked


async def odfd_verify_integrity(workspace: Workspace, alias: str) -> None:
    """``odfd verify --integrity-only ALIAS`` (the verifier's API): must report everything verified."""
    report = await verify(
        workspace,
        [alias],
        VerifyOptions(integrity_only=True, jobs=2, scratch_dir=workspace.root / "run"),
        engines=TEST_ENGINES,
    )
    assert report.exit_code == 0, report.dumps()
