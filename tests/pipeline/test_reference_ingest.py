"""Same input, same dataset as the reference: nullability, schema checks and inference on ingest.

Each test restates a kamu-cli test (named in its docstring) from
``src/infra/core/tests/tests/ingest/`` (``test_writer.rs``, ``test_push_ingest.rs``) or
``src/infra/ingest-datafusion/tests/tests/``, on odfd's Spark ingest.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.schema import IncompatibleSchemaError
from odfd.ingest.errors import BadInputError
from protocol.codec import yaml as odf_yaml
from protocol.hashing import logical_hash, logical_hash_parquet
from protocol.model import (
    AddData,
    DataTypeOption,
    SetDataSchema,
    Timestamp,
)
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.manifests import indented, push_source, root_snapshot
from tests.fixtures.spark import TEST_ENGINES
from tests.fixtures.workspace import object_path
from tests.pipeline.conftest import create, data_events, parquet_repetition, rows, write
from verifier.engine.inputs import all_slices

pytestmark = pytest.mark.spark

SOURCE_TIME = Timestamp.of(2000, 1, 1, 12)
T1 = Timestamp.of(2010, 1, 1, 12)
T2 = Timestamp.of(2010, 1, 2, 12)
T3 = Timestamp.of(2010, 1, 3, 12)
SYSTEM = ["offset", "op", "system_time", "event_time"]


def csv_read(ddl: str) -> str:
    columns = "\n".join(f"  - {c.strip()}" for c in ddl.split(","))
    return f"kind: Csv\nheader: true\nddlSchema:\n{columns}"


def snapshot_merge(pk: str) -> str:
    return f"kind: Snapshot\nprimaryKey: [{pk}]"


async def ingest(
    workspace: Workspace, dataset: Dataset, path: Path, text: str, time: Timestamp = T1
) -> None:
    await ingest_push(
        workspace,
        dataset,
        write(path, text),
        event_time=SOURCE_TIME,
        system_time=time,
        engines=TEST_ENGINES,
    )


async def last_slice(dataset: Dataset) -> Path:
    return object_path(dataset.data, (await all_slices(dataset))[-1])


async def repetition(dataset: Dataset) -> dict[str, str]:
    """Each column of the last slice as its Parquet repetition (``REQUIRED`` / ``OPTIONAL``)."""
    schema = pq.ParquetFile(await last_slice(dataset)).metadata.schema
    return {
        schema.column(i).name: "REQUIRED"
        if schema.column(i).max_definition_level == 0
        else "OPTIONAL"
        for i in range(len(schema))
    }


async def schema_blocks(dataset: Dataset) -> list[SetDataSchema]:
    return [
        b.event async for _, b in dataset.chain.iter_blocks() if isinstance(b.event, SetDataSchema)
    ]


def optional_fields(event: SetDataSchema) -> list[str]:
    assert event.schema is not None
    return [f.name for f in event.schema.fields if isinstance(f.type, DataTypeOption)]


def required(*names: str) -> dict[str, str]:
    return dict.fromkeys(names, "REQUIRED")


def optional(*names: str) -> dict[str, str]:
    return dict.fromkeys(names, "OPTIONAL")


async def replace_source(dataset: Dataset, read: str, merge: str) -> None:
    """Commits a new ``default`` push source (the reference's tests swap the read schema)."""
    text = f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: x\n  kind: Root\n  metadata:\n{push_source(read, merge)}"
    event = odf_yaml.load_snapshot(text.encode(), source="test").metadata[0]
    await dataset.commit_event(event, expected_head=await dataset.chain.head(), system_time=T1)


async def test_declared_not_null_columns_are_required(workspace: Workspace, tmp_path: Path) -> None:
    """Restates test_writer.rs ``test_data_writer_happy_path``: NOT NULL columns, the system
    columns and the event time are REQUIRED in the Parquet file and in ``SetDataSchema``; the
    second ingest reuses the schema block. (The reference merges as a Snapshot there; an Append
    checks the same here at a fraction of the cost: Snapshot coercion has its own test below.)"""
    dataset = await create(
        workspace,
        root_snapshot("cities", csv_read("city STRING NOT NULL, population BIGINT NOT NULL")),
    )
    await ingest(
        workspace, dataset, tmp_path / "1.csv", "city,population\nA,1000\nB,2000\nC,3000\n"
    )
    assert await repetition(dataset) == required(*SYSTEM, "city", "population")
    [schema] = await schema_blocks(dataset)
    assert schema.schema is not None
    assert [f.name for f in schema.schema.fields] == [*SYSTEM, "city", "population"]
    assert optional_fields(schema) == []

    await ingest(workspace, dataset, tmp_path / "2.csv", "city,population\nD,4000\n", T2)
    assert await repetition(dataset) == required(*SYSTEM, "city", "population")
    assert len(await schema_blocks(dataset)) == 1
    assert (await rows(dataset, "offset", "city", "population"))[-1] == (3, "D", 4000)


async def test_ddl_without_not_null_is_optional_and_other_columns_are_refused(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Restates ``test_data_writer_rejects_incompatible_schema``: DDL columns without NOT NULL are
    OPTIONAL; data whose columns differ from the dataset's schema is refused (IncompatibleSchema)
    with nothing committed, and matching data is accepted again afterwards."""
    dataset = await create(
        workspace, root_snapshot("cities", csv_read("city STRING, population BIGINT"))
    )
    await ingest(workspace, dataset, tmp_path / "1.csv", "city,population\nA,1000\n")
    assert await repetition(dataset) == {**required(*SYSTEM), **optional("city", "population")}
    [schema] = await schema_blocks(dataset)
    assert optional_fields(schema) == ["city", "population"]

    await replace_source(
        dataset, csv_read("city STRING, state STRING, population BIGINT"), "kind: Append"
    )
    head = await dataset.chain.head()
    with pytest.raises(
        IncompatibleSchemaError, match=r"column 6 is 'state', expected 'population'"
    ):
        await ingest(
            workspace, dataset, tmp_path / "2.csv", "city,state,population\nE,X,5000\n", T2
        )
    assert await dataset.chain.head() == head

    await replace_source(dataset, csv_read("city STRING, population BIGINT"), "kind: Append")
    await ingest(workspace, dataset, tmp_path / "3.csv", "city,population\nE,5000\n", T3)
    assert (await rows(dataset, "offset", "city"))[-1] == (1, "E")


async def test_null_in_a_required_column_is_a_bad_row(workspace: Workspace, tmp_path: Path) -> None:
    """Restates ``test_data_writer_nullability_required_to_optional_incompatible``: once the
    dataset's schema requires a column, new data that declares it optional is coerced, and a null
    in it fails the ingest with the reference's message; nothing is committed."""
    merge = "kind: Ledger\nprimaryKey: [event_time, city]"
    dataset = await create(
        workspace,
        root_snapshot(
            "cities",
            csv_read(
                "event_time TIMESTAMP NOT NULL, city STRING NOT NULL, population BIGINT NOT NULL"
            ),
            merge,
        ),
    )
    await ingest(
        workspace, dataset, tmp_path / "1.csv", "event_time,city,population\n2021-01-01,A,1000\n"
    )
    await replace_source(
        dataset,
        csv_read("event_time TIMESTAMP NOT NULL, city STRING NOT NULL, population BIGINT"),
        merge,
    )
    await ingest(
        workspace,
        dataset,
        tmp_path / "2.csv",
        "event_time,city,population\n2022-01-01,D,4000\n",
        T2,
    )
    assert await repetition(dataset) == required(*SYSTEM, "city", "population")
    head = await dataset.chain.head()
    with pytest.raises(BadInputError) as caught:
        await ingest(
            workspace,
            dataset,
            tmp_path / "3.csv",
            "event_time,city,population\n2022-01-02,E,\n",
            T3,
        )
    assert "Column `population` contains 1 null values while none were expected" in str(
        caught.value
    )
    assert caught.value.column == "population"
    assert len(str(caught.value).splitlines()) == 1
    assert await dataset.chain.head() == head


async def test_optional_column_keeps_the_dataset_schema(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Restates ``test_data_writer_nullability_optional_to_required_coerces``: the dataset's
    schema has ``population`` optional; new data declaring it NOT NULL is coerced to the
    dataset's schema, which does not change."""
    merge = snapshot_merge("city")
    dataset = await create(
        workspace,
        root_snapshot("cities", csv_read("city STRING NOT NULL, population BIGINT"), merge),
    )
    await ingest(workspace, dataset, tmp_path / "1.csv", "city,population\nA,1000\nB,2000\nC,\n")
    [schema] = await schema_blocks(dataset)
    assert optional_fields(schema) == ["population"]
    assert await repetition(dataset) == {**required(*SYSTEM, "city"), **optional("population")}

    await replace_source(
        dataset, csv_read("city STRING NOT NULL, population BIGINT NOT NULL"), merge
    )
    text = "city,population\nA,1000\nB,2000\nC,3000\nD,4000\n"
    await ingest(workspace, dataset, tmp_path / "2.csv", text, T2)
    assert await repetition(dataset) == {**required(*SYSTEM, "city"), **optional("population")}
    assert len(await schema_blocks(dataset)) == 1
    assert (await rows(dataset, "offset", "op", "city", "population"))[3:] == [
        (3, 2, "C", None),
        (4, 3, "C", 3000),
        (5, 0, "D", 4000),
    ]


async def test_predefined_schema_coerces_inferred_data(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Restates test_push_ingest.rs ``test_ingest_push_with_predefined_data_schema``: a
    ``SetDataSchema`` in the manifest, inferred NdJson data (event time as text, integers) is
    coerced to it; a null in a required column is refused with the reference's message."""
    source = push_source("kind: NdJson", "kind: Ledger\nprimaryKey: [date, city]")
    manifest = f"""\
kind: DatasetSnapshot
version: 1
content:
  name: census
  kind: Root
  metadata:
{source}\
    - kind: SetVocab
      eventTimeColumn: date
    - kind: SetDataSchema
      schema:
        fields:
          - {{name: offset, type: {{kind: Int64}}}}
          - {{name: op, type: {{kind: Int32}}}}
          - {{name: system_time, type: {{kind: Timestamp, unit: Millisecond, timezone: UTC}}}}
          - {{name: date, type: {{kind: Timestamp, unit: Millisecond, timezone: UTC}}}}
          - {{name: city, type: {{kind: String}}}}
          - {{name: population, type: {{kind: Int64}}}}
"""
    dataset = await create(workspace, manifest)
    lines = [
        '{ "date": "2020-01-01", "city": "A", "population": 1000 }',
        '{ "date": "2020-01-02", "city": "B", "population": 2000 }',
    ]
    await ingest(workspace, dataset, tmp_path / "1.ndjson", "\n".join(lines) + "\n")
    assert await repetition(dataset) == required(
        "offset", "op", "system_time", "date", "city", "population"
    )
    assert len(await schema_blocks(dataset)) == 1
    lines = [
        '{ "date": "2020-01-04", "city": "D", "population": null }',
        '{ "date": "2020-01-04", "city": "E", "population": 5000 }',
    ]
    with pytest.raises(BadInputError, match="Column `population` contains 1 null values"):
        await ingest(workspace, dataset, tmp_path / "2.ndjson", "\n".join(lines) + "\n", T2)


async def test_schema_form_option_decides_nullability(workspace: Workspace, tmp_path: Path) -> None:
    """Restates test_reader_geojson.rs (``REQUIRED geometry`` with a declared schema) and the
    reference's ``DataSchema`` rule: a field is required unless its type is ``kind: Option``."""
    read = """\
kind: NdJson
schema:
  fields:
    - {name: city, type: {kind: String}}
    - {name: population, type: {kind: Option, inner: {kind: Int64}}}
"""
    dataset = await create(workspace, root_snapshot("cities", read))
    await ingest(workspace, dataset, tmp_path / "1.ndjson", '{"city": "A"}\n')
    assert await repetition(dataset) == {**required(*SYSTEM, "city"), **optional("population")}
    [schema] = await schema_blocks(dataset)
    assert optional_fields(schema) == ["population"]
    with pytest.raises(BadInputError, match="Column `city` contains 1 null values"):
        await ingest(workspace, dataset, tmp_path / "2.ndjson", '{"population": 1}\n', T2)


async def test_inferred_event_time_from_string_and_unix_time(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Restates ``test_ingest_inference_automatic_coercion_of_event_time_from_string`` and
    ``..._from_unixtime``: an inferred event time given as RFC 3339 text or Unix seconds becomes
    a required millisecond UTC timestamp; data columns are optional."""
    text_time = await create(workspace, root_snapshot("text", "kind: NdJson"))
    await ingest(
        workspace,
        text_time,
        tmp_path / "1.ndjson",
        '{"event_time": "2020-01-02T01:02:03.123456789Z", "foo": "bar"}\n',
    )
    unix_time = await create(workspace, root_snapshot("unix", "kind: NdJson"))
    await ingest(
        workspace, unix_time, tmp_path / "2.ndjson", '{"event_time": 1577926923, "foo": "bar"}\n'
    )
    for dataset in (text_time, unix_time):
        assert await repetition(dataset) == {**required(*SYSTEM), **optional("foo")}
        table = pq.read_table(await last_slice(dataset))
        assert table.schema.field("event_time").type == pa.timestamp("ms", tz="UTC")
    [(t1,)] = await rows(text_time, "event_time")
    [(t2,)] = await rows(unix_time, "event_time")
    assert t1.isoformat() == "2020-01-02T01:02:03.123000+00:00"
    assert t2.isoformat() == "2020-01-02T01:02:03+00:00"


async def test_inferred_columns_named_like_system_columns_are_renamed(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Restates ``test_ingest_inference_automatic_renaming_of_conflicting_columns``: an inferred
    column ``op`` becomes ``_op`` instead of failing the ingest."""
    dataset = await create(workspace, root_snapshot("renamed", "kind: NdJson"))
    await ingest(workspace, dataset, tmp_path / "1.ndjson", '{"op": 123, "foo": "bar"}\n')
    table = pq.read_table(await last_slice(dataset))
    assert table.column_names == [*SYSTEM, "foo", "_op"]
    assert table.schema.field("_op").type == pa.int64()
    assert await rows(dataset, "op", "foo", "_op") == [(0, "bar", 123)]


async def test_csv_inferred_integers_are_int64(workspace: Workspace, tmp_path: Path) -> None:
    """Restates test_reader_csv.rs (inference): integers in CSV are inferred as Int64, as
    DataFusion infers them, so the dataset's schema says Int64 (Spark alone would pick Int32)."""
    dataset = await create(
        workspace, root_snapshot("ints", "kind: Csv\nheader: true\ninferSchema: true")
    )
    await ingest(workspace, dataset, tmp_path / "1.csv", "city,population,share\nA,1000,0.5\n")
    table = pq.read_table(await last_slice(dataset))
    assert table.schema.field("population").type == pa.int64()
    assert table.schema.field("share").type == pa.float64()
    [schema] = await schema_blocks(dataset)
    assert schema.schema is not None
    assert type(schema.schema.fields[5].type.inner).__name__ == "DataTypeInt64"


async def test_logical_hash_ignores_nullability(workspace: Workspace, tmp_path: Path) -> None:
    """arrow-digest hashes types and values, not nullability: a slice with REQUIRED columns has
    the logical hash of the same records written all-OPTIONAL, as odfd wrote them before, so
    datasets written before stay valid and compare equal."""
    dataset = await create(
        workspace,
        root_snapshot("cities", csv_read("city STRING NOT NULL, population BIGINT NOT NULL")),
    )
    await ingest(workspace, dataset, tmp_path / "1.csv", "city,population\nA,1000\nB,2000\n")
    path = await last_slice(dataset)
    table = pq.read_table(path)
    assert not any(f.nullable for f in table.schema)
    relaxed = table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))
    [event] = [e for e in await data_events(dataset) if isinstance(e, AddData)]
    assert event.new_data is not None
    assert logical_hash_parquet(path) == event.new_data.logical_hash
    assert logical_hash(relaxed) == event.new_data.logical_hash


async def test_an_empty_file_is_an_empty_snapshot(workspace: Workspace, tmp_path: Path) -> None:
    """As the reference's push ingest reads it (``push_ingest_executor_impl.rs``: an empty file
    with a read schema is an empty frame of that schema, merged as any other): under a Snapshot
    merge, an empty file retracts every record still present; without a read schema it is
    skipped."""
    merge = snapshot_merge("city")
    dataset = await create(
        workspace,
        root_snapshot("cities", csv_read("city STRING NOT NULL, population BIGINT"), merge),
    )
    await ingest(workspace, dataset, tmp_path / "1.csv", "city,population\nA,1000\nB,2000\n")
    await ingest(workspace, dataset, tmp_path / "2.csv", "", T2)
    assert await rows(dataset, "offset", "op", "city", "population") == [
        (0, 0, "A", 1000),
        (1, 0, "B", 2000),
        (2, 1, "A", 1000),
        (3, 1, "B", 2000),
    ]
    assert await repetition(dataset) == {**required(*SYSTEM, "city"), **optional("population")}
    head = await dataset.chain.head()
    await ingest(workspace, dataset, tmp_path / "3.csv", "", T3)  # nothing left to retract
    assert await dataset.chain.head() == head

    inferred = await create(workspace, root_snapshot("inferred", "kind: Csv\nheader: true", merge))
    await ingest(workspace, inferred, tmp_path / "4.csv", "city,population\nA,1\n")
    head = await inferred.chain.head()
    await ingest(workspace, inferred, tmp_path / "5.csv", "", T2)
    assert await inferred.chain.head() == head


async def test_ingest_sql_case_sensitivity(workspace: Workspace, tmp_path: Path) -> None:
    """Restates test_push_ingest.rs ``test_ingest_sql_case_sensitivity``: a DataFusion
    preprocess selecting ``MIXed``, ``mixED`` and ``mixED as mixed`` keeps all three (and
    ``lower``, ``UPPER``), each OPTIONAL as inferred columns are."""
    read = "kind: NdJson"
    manifest = root_snapshot("foo.bar", read).replace(
        "      merge:",
        """      preprocess:
        kind: Sql
        engine: datafusion
        query: select lower, MIXed, mixED, mixED as mixed, UPPER from input
      merge:""",
    )
    dataset = await create(workspace, manifest)
    await ingest(
        workspace,
        dataset,
        tmp_path / "data.ndjson",
        '{"lower": "lower", "MIXed": "MIXed", "mixED": "mixED", "UPPER": "UPPER"}\n',
    )
    assert await repetition(dataset) == {
        **required(*SYSTEM),
        **optional("lower", "MIXed", "mixED", "mixed", "UPPER"),
    }
    assert await rows(dataset, "offset", "op", "lower", "MIXed", "mixED", "mixed", "UPPER") == [
        (0, 0, "lower", "MIXed", "mixED", "mixED", "UPPER")
    ]


async def test_ingest_polling_preprocess_with_spark(workspace: Workspace, tmp_path: Path) -> None:
    """Restates test_polling_ingest.rs ``test_ingest_polling_preprocess_with_spark``: the read
    schema declares ``city`` and ``population`` required, but a Spark preprocess reads its
    input as all-nullable, so both come out OPTIONAL (the event time stays REQUIRED); a
    DataFusion preprocess of the same query keeps what its plan proves: both REQUIRED."""
    from odfd.coordinator.ingest import ingest_polling

    source = write(tmp_path / "data.csv", "city,population\nA,1000\nB,2000\nC,3000\n")
    read = (
        "kind: Csv\nheader: true\nschema:\n  fields:\n"
        "    - {name: city, type: {kind: String}}\n"
        "    - {name: population, type: {kind: Int64}}\n"
    )
    for engine, repetitions in [
        ("spark", optional("city", "population")),
        ("datafusion", required("city", "population")),
    ]:
        manifest = f"""\
kind: DatasetSnapshot
version: 1
content:
  name: foo.{engine}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: Url, url: "{source.as_uri()}"}}
      read:
{indented(read, 8)}
      preprocess:
        kind: Sql
        engine: {engine}
        query: select city, population * 10 as population from input
      merge: {{kind: Append}}
"""
        dataset = await create(workspace, manifest)
        await ingest_polling(workspace, dataset, engines=TEST_ENGINES, system_time=T1)
        assert await repetition(dataset) == {**required(*SYSTEM), **repetitions}, engine
        assert await rows(dataset, "offset", "op", "city", "population") == [
            (0, 0, "A", 10000),
            (1, 0, "B", 20000),
            (2, 0, "C", 30000),
        ]


NESTED_READ = """\
kind: NdJson
schema:
  fields:
    - {name: city, type: {kind: String}}
    - name: point
      type:
        kind: Struct
        fields:
          - {name: x, type: {kind: Int64}}
          - {name: label, type: {kind: Option, inner: {kind: String}}}
    - {name: ids, type: {kind: Option, inner: {kind: List, itemType: {kind: Int64}}}}
"""
NESTED_REPETITION = {
    "point": "REQUIRED",
    "point.x": "REQUIRED",
    "point.label": "OPTIONAL",
    "ids": "OPTIONAL",
    "ids.list": "REPEATED",
    "ids.list.element": "REQUIRED",
}


async def test_nested_fields_keep_the_read_schema_nullability(
    workspace: Workspace, tmp_path: Path
) -> None:
    """The reference reads with the declared schema and keeps its nullability at every depth
    (a struct field or list item not wrapped in ``kind: Option`` is REQUIRED), in the file and
    in ``SetDataSchema``; Spark's readers make nested fields nullable, and odfd writes the
    declared ones anyway, also through a DataFusion preprocess step selecting the columns. A
    null in a required struct field is a bad row naming the field."""
    line = '{"city": "A", "point": {"x": 1}, "ids": [1, 2]}\n'
    preprocess = """      preprocess:
        kind: Sql
        engine: datafusion
        query: select city, point, ids from input
      merge:"""
    plain = await create(workspace, root_snapshot("plain", NESTED_READ))
    through = await create(
        workspace,
        root_snapshot("through", NESTED_READ).replace("      merge:", preprocess),
    )
    for dataset in (plain, through):
        await ingest(workspace, dataset, tmp_path / "1.ndjson", line)
        written = parquet_repetition(await last_slice(dataset))
        assert {k: v for k, v in written.items() if k.split(".")[0] in ("point", "ids")} == (
            NESTED_REPETITION
        ), dataset.alias
        [schema] = await schema_blocks(dataset)
        assert schema.schema is not None
        [point] = [f for f in schema.schema.fields if f.name == "point"]
        assert not isinstance(point.type, DataTypeOption)
        assert [isinstance(f.type, DataTypeOption) for f in point.type.fields] == [False, True]
        assert await rows(dataset, "city", "point", "ids") == [
            ("A", {"x": 1, "label": None}, [1, 2])
        ]
    with pytest.raises(BadInputError, match=r"Column `point\.x` contains 1 null values"):
        await ingest(workspace, plain, tmp_path / "2.ndjson", '{"city": "B", "point": {}}\n', T2)
