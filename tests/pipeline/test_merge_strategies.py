"""Every merge strategy through several real ingests: exact rows, operation types and offsets."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfd.coordinator.ingest import ingest_push
from odfd.ingest.errors import MergeError
from protocol.model import Timestamp
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events, rows, write

pytestmark = pytest.mark.spark

A, R, CF, CT = 0, 1, 2, 3  # +A, -R, -C, +C


def ts(day: int) -> Timestamp:
    return Timestamp.of(2024, 1, day)


def dt(day: int, hour: int = 0) -> datetime:
    return datetime(2024, 1, day, hour, tzinfo=UTC)


CITIES_READ = """        kind: Csv
        header: true
        schema:
          fields:
            - name: city
              type: string
            - name: population
              type: int64"""


async def test_snapshot_emits_appends_retractions_and_corrections(
    workspace: Workspace, tmp_path: Path
) -> None:
    merge = """        kind: Snapshot
        primaryKey:
          - city"""
    dataset = await create(workspace, root_snapshot("cities", CITIES_READ, merge))

    async def push(day: int, text: str):
        path = write(tmp_path / f"cities-{day}.csv", "city,population\n" + text)
        return await ingest_push(
            workspace,
            dataset,
            path,
            event_time=ts(day),
            system_time=ts(day + 10),
            engines=TEST_ENGINES,
        )

    await push(1, "a,1000\nc,3000\nb,2000\n")
    await push(2, "a,1000\nb,2500\nd,4000\n")  # b changes, c disappears, d appears
    unchanged = await push(3, "d,4000\nb,2500\na,1000\n")
    assert unchanged.up_to_date
    await push(4, "b,2500\nc,3100\n")  # a and d disappear, c comes back

    assert await rows(dataset, "offset", "op", "event_time", "city", "population") == [
        (0, A, dt(1), "a", 1000),
        (1, A, dt(1), "b", 2000),
        (2, A, dt(1), "c", 3000),
        (3, CF, dt(1), "b", 2000),
        (4, CT, dt(2), "b", 2500),
        (5, R, dt(1), "c", 3000),
        (6, A, dt(2), "d", 4000),
        (7, R, dt(1), "a", 1000),
        (8, A, dt(4), "c", 3100),
        (9, R, dt(2), "d", 4000),
    ]
    events = await data_events(dataset)
    assert [
        (e.prev_offset, e.new_data.offset_interval.start, e.new_data.offset_interval.end)
        for e in events
    ] == [
        (None, 0, 2),
        (2, 3, 6),
        (6, 7, 9),
    ]
    assert [e.new_watermark for e in events] == [ts(1), ts(2), ts(4)]
    system_times = await rows(dataset, "system_time")
    assert {t for (t,) in system_times} == {dt(11), dt(12), dt(14)}


async def test_snapshot_rejects_duplicate_keys_and_leaves_the_dataset_as_it_was(
    workspace: Workspace, tmp_path: Path
) -> None:
    merge = """        kind: Snapshot
        primaryKey:
          - city"""
    dataset = await create(workspace, root_snapshot("cities", CITIES_READ, merge))
    head = await dataset.chain.head()
    with pytest.raises(MergeError, match=r"primary key \(city='a'\) appears 2 times"):
        await ingest_push(
            workspace,
            dataset,
            write(tmp_path / "dup.csv", "city,population\na,1\na,2\n"),
            engines=TEST_ENGINES,
        )
    assert await dataset.chain.head() == head


async def test_ledger_appends_only_unseen_keys(workspace: Workspace, tmp_path: Path) -> None:
    read = """        kind: Csv
        header: true
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: id
              type: int64
            - name: value
              type: string"""
    merge = """        kind: Ledger
        primaryKey:
          - id"""
    dataset = await create(workspace, root_snapshot("ledger", read, merge))
    first = write(
        tmp_path / "1.csv",
        "event_time,id,value\n2024-01-03T00:00:00Z,3,c\n2024-01-01T00:00:00Z,1,a\n2024-01-02T00:00:00Z,2,b\n",
    )
    second = write(
        tmp_path / "2.csv",
        "event_time,id,value\n2024-01-02T00:00:00Z,2,b\n2024-01-05T00:00:00Z,5,e\n2024-01-03T00:00:00Z,3,c\n2024-01-04T00:00:00Z,4,d\n",
    )
    await ingest_push(workspace, dataset, first, engines=TEST_ENGINES)
    await ingest_push(workspace, dataset, second, engines=TEST_ENGINES)
    assert (await ingest_push(workspace, dataset, second, engines=TEST_ENGINES)).up_to_date
    assert await rows(dataset, "offset", "op", "event_time", "id", "value") == [
        (0, A, dt(1), 1, "a"),
        (1, A, dt(2), 2, "b"),
        (2, A, dt(3), 3, "c"),
        (3, A, dt(4), 4, "d"),
        (4, A, dt(5), 5, "e"),
    ]


async def test_append_orders_by_event_time_then_input_order(
    workspace: Workspace, tmp_path: Path
) -> None:
    read = """        kind: NdJson
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: value
              type: string"""
    dataset = await create(workspace, root_snapshot("log", read))
    lines = [
        '{"event_time": "2024-01-02T00:00:00Z", "value": "x"}',
        '{"value": "no time"}',
        '{"event_time": "2024-01-01T00:00:00Z", "value": "y"}',
        '{"event_time": "2024-01-02T00:00:00Z", "value": "z"}',
    ]
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "1.ndjson", "\n".join(lines) + "\n"),
        event_time=ts(9),
        engines=TEST_ENGINES,
    )
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "2.ndjson", lines[0] + "\n"),
        event_time=ts(9),
        engines=TEST_ENGINES,
    )
    assert await rows(dataset, "offset", "op", "event_time", "value") == [
        (0, A, dt(1), "y"),
        (1, A, dt(2), "x"),
        (2, A, dt(2), "z"),
        (3, A, dt(9), "no time"),  # a record without event time gets the source's
        (4, A, dt(2), "x"),
    ]
    events = await data_events(dataset)
    assert [e.new_watermark for e in events] == [ts(9), ts(9)]  # the watermark never moves back


CHANGELOG_READ = """        kind: Csv
        header: true
        schema:
          fields:
            - name: op
              type: int32
            - name: id
              type: int64
            - name: value
              type: string"""


async def test_changelog_stream_is_taken_as_is_after_validation(
    workspace: Workspace, tmp_path: Path
) -> None:
    merge = """        kind: ChangelogStream
        primaryKey:
          - id"""
    dataset = await create(workspace, root_snapshot("changelog", CHANGELOG_READ, merge))
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "1.csv", "op,id,value\n0,2,b\n0,1,a\n"),
        event_time=ts(1),
        engines=TEST_ENGINES,
    )
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "2.csv", "op,id,value\n1,2,b\n2,1,a\n3,1,a2\n0,2,b2\n"),
        event_time=ts(2),
        engines=TEST_ENGINES,
    )
    head = await dataset.chain.head()
    with pytest.raises(
        MergeError, match=r"correct-to \(\+C\) not preceded by a correct-from.*id=7"
    ):
        await ingest_push(
            workspace,
            dataset,
            write(tmp_path / "3.csv", "op,id,value\n0,6,f\n3,7,g\n"),
            engines=TEST_ENGINES,
        )
    with pytest.raises(MergeError, match="unknown operation type"):
        await ingest_push(
            workspace,
            dataset,
            write(tmp_path / "4.csv", "op,id,value\n9,6,f\n"),
            engines=TEST_ENGINES,
        )
    assert await dataset.chain.head() == head
    assert await rows(dataset, "offset", "op", "id", "value") == [
        (0, A, 1, "a"),
        (1, A, 2, "b"),
        (2, CF, 1, "a"),
        (3, CT, 1, "a2"),
        (4, R, 2, "b"),  # a retraction and a re-append of the same key keep their order
        (5, A, 2, "b2"),
    ]


async def test_upsert_stream_becomes_a_changelog(workspace: Workspace, tmp_path: Path) -> None:
    merge = """        kind: UpsertStream
        primaryKey:
          - id"""
    dataset = await create(workspace, root_snapshot("upserts", CHANGELOG_READ, merge))
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "1.csv", "op,id,value\n0,1,a\n0,2,b\n0,1,a-draft\n0,1,a\n"),
        event_time=ts(1),
        engines=TEST_ENGINES,
    )
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "2.csv", "op,id,value\n0,1,a2\n1,2,x\n0,3,c\n1,9,nothing\n"),
        event_time=ts(2),
        engines=TEST_ENGINES,
    )
    repeat = await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "3.csv", "op,id,value\n0,1,a2\n1,2,b\n"),
        event_time=ts(3),
        engines=TEST_ENGINES,
    )
    assert repeat.up_to_date
    assert await rows(dataset, "offset", "op", "event_time", "id", "value") == [
        (0, A, dt(1), 1, "a"),  # only the last upsert of a key within a batch counts
        (1, A, dt(1), 2, "b"),
        (2, CF, dt(1), 1, "a"),
        (3, CT, dt(2), 1, "a2"),
        (4, R, dt(1), 2, "b"),  # a delete retracts the last values, whatever the delete carried
        (5, A, dt(2), 3, "c"),
    ]
