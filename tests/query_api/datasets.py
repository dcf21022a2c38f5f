"""The datasets of the query API tests: the reference's ``population`` test dataset (two cities,
with attachments, info and a license, written at 2050-01-01T12:00:00Z) under the reference's
multi-tenant alias, a dataset that grows in two slices, and a private one. Built with the storage
API (no Spark)."""

from __future__ import annotations

import pyarrow as pa

from protocol.model import (
    AddData,
    AttachmentEmbedded,
    AttachmentsEmbedded,
    MetadataEvent,
    SetAttachments,
    SetInfo,
    SetLicense,
    Timestamp,
)
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.verifier.builders import (
    MS,
    root_with_slices,
    root_with_table,
    slice_table,
    write_slice,
)

POPULATION = "kamu-server/population"
GROWING = "growing"
PRIVATE = "secret.nums"
SYSTEM_TIME = Timestamp.of(2050, 1, 1, 12)
TEST_KEY_SEED = bytes([123] * 32)
"""The reference's test identity key (its ``did:key`` is
``did:key:z6Mko2nqhQ9wYSTS5Giab2j1aHzGnxHimqwmFeEVY8aNsVnN``)."""


def population_table() -> pa.Table:
    millis = SYSTEM_TIME.epoch_millis
    schema = pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", MS, nullable=False),
            pa.field("event_time", MS, nullable=False),
            pa.field("city", pa.utf8(), nullable=False),
            pa.field("population", pa.uint64(), nullable=False),
        ]
    )
    return pa.table(
        [
            pa.array([0, 1], pa.int64()),
            pa.array([0, 0], pa.int32()),
            pa.array([millis, millis], pa.int64()).cast(MS),
            pa.array([millis, millis], pa.int64()).cast(MS),
            pa.array(["A", "B"]),
            pa.array([100, 200], pa.uint64()),
        ],
        schema=schema,
    )


async def add_population(workspace: Workspace) -> Dataset:
    events: list[MetadataEvent] = [
        SetAttachments(
            attachments=AttachmentsEmbedded(
                items=(AttachmentEmbedded(path="README.md", content="Blah"),)
            )
        ),
        SetInfo(description="Test dataset", keywords=("foo", "bar")),
        SetLicense(
            short_name="apache-2.0",
            name="apache-2.0",
            website_url="https://www.apache.org/licenses/LICENSE-2.0",
        ),
    ]
    return await root_with_table(
        workspace, POPULATION, population_table(), events=events, system_time=SYSTEM_TIME
    )


async def add_all(workspace: Workspace) -> None:
    await add_population(workspace)
    await root_with_slices(workspace, GROWING, [[1, 2, 3]])
    await root_with_slices(workspace, PRIVATE, [[7, 8]])


async def grow(workspace: Workspace, alias: str, values: list[int]) -> None:
    """One more slice of ``values`` on a dataset ``root_with_slices`` made."""
    dataset = await workspace.get_dataset(alias)
    state = await dataset.chain.state()
    offset = (state.last_offset or 0) + 1
    time = Timestamp(state.system_time.epoch_nanos + 60_000_000_000)
    path = workspace.root / "staging" / f"{alias}-{offset}.parquet"
    data_slice = write_slice(slice_table(offset, values, system_time=time), path)
    await dataset.commit_data(
        AddData(
            prev_offset=state.last_offset,
            new_data=data_slice,
            new_watermark=state.last_watermark,
        ),
        data_file=path,
        expected_head=state.head,
        system_time=time,
    )
