"""Read steps: every format with its options and declared schema; malformed input named precisely."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.coordinator.ingest import ingest_push
from odfd.ingest.errors import BadInputError, IngestError
from protocol.model import Timestamp
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, rows, write
from verifier.engine.errors import InvalidQueryError

pytestmark = pytest.mark.spark

EVENT_TIME = Timestamp.of(2024, 7, 1)


async def test_csv_options(workspace: Workspace, tmp_path: Path) -> None:
    read = """
kind: Csv
separator: ';'
quote: "'"
escape: '|'
nullValue: 'N/A'
timestampFormat: dd.MM.yyyy HH:mm
dateFormat: dd.MM.yyyy
schema:
  fields:
    - name: event_time
      type: timestamp
    - name: day
      type: date
    - name: name
      type: string
    - name: amount
      type: {kind: Option, inner: {kind: Decimal, precision: 10, scale: 2}}
"""
    dataset = await create(workspace, root_snapshot("csv", read))
    text = "02.01.2024 10:30;02.01.2024;'Smith; John';12.50\n03.01.2024 08:00;03.01.2024;'O|'Brien';N/A\n"
    await ingest_push(workspace, dataset, write(tmp_path / "in.csv", text), engines=TEST_ENGINES)
    assert await rows(dataset, "event_time", "day", "name", "amount") == [
        (
            datetime(2024, 1, 2, 10, 30, tzinfo=UTC),
            date(2024, 1, 2),
            "Smith; John",
            pytest.approx(12.5),
        ),
        (datetime(2024, 1, 3, 8, 0, tzinfo=UTC), date(2024, 1, 3), "O'Brien", None),
    ]


async def test_csv_without_schema_reads_text_and_parses_event_time(
    workspace: Workspace, tmp_path: Path
) -> None:
    dataset = await create(workspace, root_snapshot("raw", "kind: Csv\nheader: true"))
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "in.csv", "event_time,n\n2024-01-05T01:02:03Z,7\n"),
        engines=TEST_ENGINES,
    )
    assert await rows(dataset, "event_time", "n") == [
        (datetime(2024, 1, 5, 1, 2, 3, tzinfo=UTC), "7")
    ]


@pytest.mark.parametrize("engine", ["spark", "DataFusion"])
async def test_legacy_ddl_schema_and_preprocess_sql(
    workspace: Workspace, tmp_path: Path, engine: str
) -> None:
    read = """
kind: Csv
ddlSchema:
  - city STRING
  - population BIGINT
"""
    manifest = root_snapshot("ddl", read).replace(
        "      merge:",
        f"""      preprocess:
        kind: Sql
        engine: {engine}
        query: SELECT upper(city) AS city, population * 1000 AS population FROM input WHERE population > 1
      merge:""",
    )
    dataset = await create(workspace, manifest)
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "in.csv", "kyiv,3000\ntiny,1\nlviv,700\n"),
        event_time=EVENT_TIME,
        engines=TEST_ENGINES,
    )
    assert await rows(dataset, "city", "population") == [("KYIV", 3_000_000), ("LVIV", 700_000)]


async def test_a_bad_datafusion_preprocess_query_fails_naming_the_dataset(
    workspace: Workspace, tmp_path: Path
) -> None:
    manifest = root_snapshot("ddl", "kind: Csv\nddlSchema:\n  - city STRING\n").replace(
        "      merge:",
        """      preprocess:
        kind: Sql
        engine: datafusion
        query: SELECT nope FROM input
      merge:""",
    )
    dataset = await create(workspace, manifest)
    with pytest.raises(InvalidQueryError, match=r"^ddl: preprocess: query is invalid: .*nope"):
        await ingest_push(
            workspace,
            dataset,
            write(tmp_path / "in.csv", "kyiv\n"),
            event_time=EVENT_TIME,
            engines=TEST_ENGINES,
        )
    assert (await dataset.chain.state()).last_offset is None  # nothing committed


async def test_json_with_sub_path(workspace: Workspace, tmp_path: Path) -> None:
    read = """
kind: Json
subPath: result.items
schema:
  fields:
    - name: id
      type: int64
    - name: tags
      type: {kind: List, itemType: {kind: String}}
"""
    dataset = await create(workspace, root_snapshot("json", read))
    document = {"result": {"items": [{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": []}]}}
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "in.json", json.dumps(document)),
        event_time=EVENT_TIME,
        engines=TEST_ENGINES,
    )
    assert await rows(dataset, "id", "tags") == [(1, ["a", "b"]), (2, [])]
    with pytest.raises(BadInputError, match="sub-path result.items not found"):
        await ingest_push(
            workspace, dataset, write(tmp_path / "bad.json", '{"result": {}}'), engines=TEST_ENGINES
        )


async def test_geojson_and_ndgeojson(workspace: Workspace, tmp_path: Path) -> None:
    read = """
schema:
  fields:
    - name: name
      type: string
    - name: geometry
      type: string
"""
    features = [
        {
            "type": "Feature",
            "properties": {"name": "a"},
            "geometry": {"type": "Point", "coordinates": [1.0, 2.0]},
        },
        {
            "type": "Feature",
            "properties": {"name": "b"},
            "geometry": {"type": "Point", "coordinates": [1e-7, 1.5e16]},
        },
    ]
    geo = await create(workspace, root_snapshot("geo", "kind: GeoJson\n" + read))
    collection = {"type": "FeatureCollection", "features": features}
    await ingest_push(
        workspace,
        geo,
        write(tmp_path / "in.geojson", json.dumps(collection)),
        event_time=EVENT_TIME,
        engines=TEST_ENGINES,
    )
    nd = await create(workspace, root_snapshot("ndgeo", "kind: NdGeoJson\n" + read))
    await ingest_push(
        workspace,
        nd,
        write(tmp_path / "in.ndgeojson", "\n".join(map(json.dumps, features))),
        event_time=EVENT_TIME,
        engines=TEST_ENGINES,
    )
    expected = [
        ("a", '{"coordinates":[1.0,2.0],"type":"Point"}'),
        ("b", '{"coordinates":[1e-7,1.5e16],"type":"Point"}'),  # as Rust spells f64
    ]
    assert await rows(geo, "name", "geometry") == expected
    assert await rows(nd, "name", "geometry") == expected
    with pytest.raises(BadInputError, match="feature 2: not a GeoJSON Feature"):
        await ingest_push(
            workspace,
            nd,
            write(tmp_path / "bad.ndgeojson", json.dumps(features[0]) + '\n{"type": "Point"}\n'),
            engines=TEST_ENGINES,
        )


async def test_parquet_with_declared_schema(workspace: Workspace, tmp_path: Path) -> None:
    read = """
kind: Parquet
schema:
  fields:
    - name: id
      type: int64
    - name: label
      type: string
"""
    dataset = await create(workspace, root_snapshot("pq", read))
    pq.write_table(
        pa.table({"label": ["x", "y"], "id": pa.array([1, 2], pa.int32()), "ignored": [0, 0]}),
        tmp_path / "in.parquet",
    )
    await ingest_push(
        workspace, dataset, tmp_path / "in.parquet", event_time=EVENT_TIME, engines=TEST_ENGINES
    )
    assert await rows(dataset, "id", "label") == [(1, "x"), (2, "y")]
    head = await dataset.chain.head()
    pq.write_table(
        pa.table({"label": ["x", "y", "z"], "id": ["1", "2", "three"]}), tmp_path / "bad.parquet"
    )
    with pytest.raises(
        BadInputError,
        match=r"bad\.parquet: malformed row 3, column 'id': value 'three' is not a valid BIGINT",
    ):
        await ingest_push(workspace, dataset, tmp_path / "bad.parquet", engines=TEST_ENGINES)
    assert await dataset.chain.head() == head


MEASUREMENTS = """
kind: Csv
header: true
schema:
  fields:
    - name: event_time
      type: timestamp
    - name: station
      type: string
    - name: reading
      type: int32
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "event_time,station,reading\n2024-01-01T00:00:00Z,a,1\n\n2024-01-01T01:00:00Z,b,x7\n2024-01-01T02:00:00Z,c,oops\n",
            r"in\.csv: malformed row 2 \(line 4\), column 'reading': value 'x7' is not a valid INT \(1 more malformed row in this file\)",
        ),
        (
            "event_time,station,reading\nyesterday,a,1\n",
            r"malformed row 1 \(line 2\), column 'event_time': value 'yesterday' is not a valid TIMESTAMP",
        ),
        (
            "event_time,station,reading\n2024-01-01T00:00:00Z,a,1,extra\n",
            r"malformed row 1 \(line 2\): has 4 values but the schema has 3 columns",
        ),
    ],
)
async def test_malformed_csv_names_file_row_and_column(
    workspace: Workspace, tmp_path: Path, text: str, message: str
) -> None:
    dataset = await create(workspace, root_snapshot("m", MEASUREMENTS))
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "ok.csv", "event_time,station,reading\n2024-01-01T00:00:00Z,z,0\n"),
        engines=TEST_ENGINES,
    )
    head = await dataset.chain.head()
    with pytest.raises(BadInputError, match=message) as caught:
        await ingest_push(
            workspace, dataset, write(tmp_path / "in.csv", text), engines=TEST_ENGINES
        )
    assert caught.value.path == str(tmp_path / "in.csv")
    assert await dataset.chain.head() == head
    assert await rows(dataset, "station") == [("z",)]


async def test_malformed_row_of_a_file_spark_splits_is_counted_from_the_start(
    workspace: Workspace, tmp_path: Path
) -> None:
    # Over 4 MB, Spark splits a file across cores unless told not to; row ids would then restart
    # at each split (as partition-tagged ids) instead of counting records from the file's start.
    good = "".join(f"2024-01-01T00:00:00Z,s{n},{n}\n" for n in range(200_000))
    text = "event_time,station,reading\n" + good + "2024-01-02T00:00:00Z,late,x7\n"
    assert len(text) > 5_000_000
    dataset = await create(workspace, root_snapshot("big", MEASUREMENTS))
    with pytest.raises(
        BadInputError,
        match=r"big\.csv: malformed row 200001 \(line 200002\), column 'reading': value 'x7' is not a valid INT$",
    ) as caught:
        await ingest_push(
            workspace, dataset, write(tmp_path / "big.csv", text), engines=TEST_ENGINES
        )
    assert (caught.value.line, caught.value.record, caught.value.column) == (
        200_002,
        200_001,
        "reading",
    )


async def test_malformed_ndjson_names_line_and_column(workspace: Workspace, tmp_path: Path) -> None:
    read = """
kind: NdJson
schema:
  fields:
    - name: id
      type: int32
    - name: name
      type: string
"""
    dataset = await create(workspace, root_snapshot("nd", read))
    head = await dataset.chain.head()
    with pytest.raises(
        BadInputError,
        match=r"in\.ndjson: malformed row 2 \(line 3\), column 'id': value \"two\" is not a valid INT",
    ):
        await ingest_push(
            workspace,
            dataset,
            write(tmp_path / "in.ndjson", '{"id": 1}\n\n{"id": "two", "name": "b"}\n'),
            engines=TEST_ENGINES,
        )
    with pytest.raises(BadInputError, match=r"malformed row 1 \(line 1\): is not valid JSON"):
        await ingest_push(
            workspace,
            dataset,
            write(tmp_path / "broken.ndjson", '{"id": 1,\n'),
            engines=TEST_ENGINES,
        )
    assert await dataset.chain.head() == head


async def test_event_time_must_be_a_time(workspace: Workspace, tmp_path: Path) -> None:
    read = """
kind: Csv
schema:
  fields:
    - name: event_time
      type: int64
"""
    dataset = await create(workspace, root_snapshot("et", read))
    with pytest.raises(
        IngestError,
        match="event time column 'event_time' must be a TIMESTAMP or DATE, found BIGINT",
    ):
        await ingest_push(
            workspace, dataset, write(tmp_path / "in.csv", "1\n"), engines=TEST_ENGINES
        )
