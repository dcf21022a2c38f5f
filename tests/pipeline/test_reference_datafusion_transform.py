"""The reference DataFusion engine's own tests, restated against odfd's DataFusion engine.

Each test names the test of ``kamu-data/kamu-engine-datafusion`` (v0.9.0,
``tests/tests/test_transform.rs`` and ``tests/tests/test_regressions.rs``) it restates: the
same input slice (three cities, every column REQUIRED, as the reference's
``write_sample_data`` writes it; the regressions' own inputs), the same queries, and the rows,
Parquet schema (REQUIRED / OPTIONAL per column), offsets, watermark and error kind it expects.
Only ``test_issues_arrow_4308`` (a file Spark wrote) starts a JVM.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.coordinator.transform import update_derivative
from protocol import arrow_schema
from protocol.hashing import logical_hash_parquet
from protocol.identity import DatasetId, DatasetRef
from protocol.model import (
    DatasetKind,
    SetDataSchema,
    SetTransform,
    SqlQueryStep,
    Timestamp,
    TransformInput,
    TransformSql,
    Watermark,
)
from storage.workspace import Workspace
from tests.fixtures.workspace import object_path
from tests.verifier.builders import T0, root_with_slices
from verifier.audit import VerifyOptions, verify
from verifier.engine.columns import Op, Vocab
from verifier.engine.contract import (
    QueryTable,
    TransformInputSlice,
    TransformRequest,
    TransformResult,
)
from verifier.engine.datafusion.engine import DataFusionEngine
from verifier.engine.errors import InvalidQueryError
from verifier.engine.inputs import all_slices, arrow_schema_of
from verifier.engine.output import TIMESTAMP_MS_UTC, write_batches
from verifier.engine.registry import Engines

ENGINE = DataFusionEngine()
INPUT_SYSTEM_TIME = Timestamp.parse_rfc3339("2023-02-01T00:00:00Z")
SYSTEM_TIME = Timestamp.parse_rfc3339("2023-03-01T00:00:00Z")
EVENT_TIME = datetime(2023, 1, 1, tzinfo=UTC)
CITIES = [("vancouver", 675_000), ("seattle", 733_000), ("kyiv", 2_884_000)]
DEFAULT_QUERY = "select event_time, city, population + 100 as population from foo"
ALL_REQUIRED = {
    "offset": "REQUIRED",
    "op": "REQUIRED",
    "system_time": "REQUIRED",
    "event_time": "REQUIRED",
    "city": "REQUIRED",
    "population": "REQUIRED",
}


def write_input(path: Path, rows: list[tuple[Op, str, int]]) -> tuple[pa.Schema, Path]:
    """An input slice as the reference's ``write_sample_data`` writes it: every column REQUIRED."""
    table = pa.table(
        {
            "op": pa.array([int(op) for op, _, _ in rows], pa.int32()),
            "event_time": pa.array([EVENT_TIME] * len(rows), TIMESTAMP_MS_UTC),
            "city": [city for _, city, _ in rows],
            "population": pa.array([n for _, _, n in rows], pa.int64()),
        }
    )
    schema, written = write_batches(
        table.schema,
        iter(table.to_batches()),
        vocab=Vocab(),
        start_offset=0,
        system_time=INPUT_SYSTEM_TIME,
        out_path=path,
        required=frozenset({"event_time", "city", "population"}),
    )
    assert written is not None
    return schema, written.path


@pytest.fixture(scope="module")
def foo(tmp_path_factory: pytest.TempPathFactory) -> TransformInputSlice:
    schema, path = write_input(
        tmp_path_factory.mktemp("foo") / "input.parquet",
        [(Op.APPEND, city, n) for city, n in CITIES],
    )
    return TransformInputSlice(
        DatasetId.new_seeded(b"foo"), "foo", Vocab(), schema, (path,), (0, 2)
    )


def transform(
    tmp_path: Path, foo: TransformInputSlice, *queries: tuple[str | None, str], **changes: object
) -> TransformResult:
    steps = tuple(SqlQueryStep(alias=a, query=q) for a, q in queries or ((None, DEFAULT_QUERY),))
    request = TransformRequest(
        dataset_alias="bar",
        transform=TransformSql(engine="datafusion", queries=steps),
        vocab=Vocab(),
        system_time=SYSTEM_TIME,
        next_offset=0,
        inputs=(foo,),
        prev_checkpoint=None,
        out_dir=tmp_path / "out",
    )
    return ENGINE.run_transform(dataclasses.replace(request, **changes))  # type: ignore[arg-type]


def repetition(path: Path) -> dict[str, str]:
    """Each column's Parquet repetition, as the reference's tests print the file's schema."""
    schema = pq.ParquetFile(path).metadata.schema
    return {
        schema.column(i).name: "REQUIRED"
        if schema.column(i).max_definition_level == 0
        else "OPTIONAL"
        for i in range(len(schema))
    }


def rows(result: TransformResult) -> list[tuple]:
    assert result.new_data is not None
    table = pq.read_table(result.new_data.path)
    return [tuple(r.values()) for r in table.to_pylist()]


def expected_rows(
    populations: list[int], start: int = 0, event_time: object = EVENT_TIME
) -> list[tuple]:
    system = SYSTEM_TIME.to_datetime()
    return [
        (start + i, 0, system, event_time, city, n)
        for i, ((city, _), n) in enumerate(zip(CITIES, populations, strict=True))
    ]


def test_result_schema(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_result_schema`` (and the schema half of
    ``test_result_optimal_parquet_encoding``): a column selected from a required input column,
    and arithmetic on one, stay REQUIRED; the ``SetDataSchema`` says the same as the file."""
    result = transform(tmp_path, foo)
    assert result.new_data is not None
    assert (result.new_data.offset_start, result.new_data.offset_end) == (0, 2)
    assert result.new_watermark is None
    assert repetition(result.new_data.path) == ALL_REQUIRED
    assert [f.nullable for f in result.schema] == [False] * 6
    assert pq.read_schema(result.new_data.path) == result.schema
    assert rows(result) == expected_rows([675_100, 733_100, 2_884_100])


def test_chain_of_queries(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_chain_of_queries``: a named step is a view the next step reads."""
    result = transform(
        tmp_path,
        foo,
        ("a", "select event_time, city, population + 100 as population from foo"),
        (None, "select event_time, city, population + 50 as population from a"),
    )
    assert rows(result) == expected_rows([675_150, 733_150, 2_884_150])
    assert result.new_data is not None and repetition(result.new_data.path) == ALL_REQUIRED


def test_propagates_input_watermark(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_propagates_input_watermark``: the input's latest watermark is the output's."""
    first, second = (
        Timestamp.parse_rfc3339("2023-01-01T00:00:00Z"),
        Timestamp.parse_rfc3339("2023-02-01T00:00:00Z"),
    )
    marked = dataclasses.replace(
        foo,
        explicit_watermarks=(
            Watermark(system_time=first, event_time=first),
            Watermark(system_time=second, event_time=second),
        ),
    )
    result = transform(tmp_path, foo, inputs=(marked,))
    assert result.new_watermark == second


def test_empty_result(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_empty_result``: no rows, no slice and no watermark; the schema the plan
    gives is still known (REQUIRED columns)."""
    result = transform(
        tmp_path, foo, (None, "select event_time, city, population from foo where city = 'mumbai'")
    )
    assert result.new_data is None and result.new_watermark is None
    assert not (tmp_path / "out" / "data.parquet").exists()
    assert [f.nullable for f in result.schema] == [False] * 6


def test_empty_input(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_empty_input``: an input without new records reads as an empty table of
    its schema."""
    empty = dataclasses.replace(foo, data_paths=(), offset_interval=None)
    result = transform(tmp_path, foo, inputs=(empty,))
    assert result.new_data is None and result.new_watermark is None
    assert [f.nullable for f in result.schema] == [False] * 6


def test_partial_input(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_partial_input``: only the input's offsets 1..1 are read."""
    result = transform(tmp_path, foo, inputs=(dataclasses.replace(foo, offset_interval=(1, 1)),))
    assert result.new_data is not None
    assert (result.new_data.offset_start, result.new_data.offset_end) == (0, 0)
    assert rows(result) == [(0, 0, SYSTEM_TIME.to_datetime(), EVENT_TIME, "seattle", 733_100)]


def test_output_offset(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_output_offset``: offsets continue from the request's next offset."""
    result = transform(tmp_path, foo, next_offset=10)
    assert result.new_data is not None
    assert (result.new_data.offset_start, result.new_data.offset_end) == (10, 12)
    assert rows(result) == expected_rows([675_100, 733_100, 2_884_100], start=10)


@pytest.mark.parametrize(
    ("test", "query"),
    [
        ("test_bad_sql", "select event_time, city, populllation from foo"),
        ("test_event_time_as_invalid_type", "select 123 as event_time, city, population from foo"),
        ("op of a wider integer type", "select cast(op as bigint) as op, event_time from foo"),
    ],
)
def test_invalid_queries(foo: TransformInputSlice, tmp_path: Path, test: str, query: str) -> None:
    """Restates ``test_bad_sql`` and ``test_event_time_as_invalid_type``: the kind is an invalid
    query and nothing is written. An ``op`` column the reference would not widen to Int32 is
    refused the same way, naming the type it must be."""
    with pytest.raises(InvalidQueryError) as caught:
        transform(tmp_path, foo, (None, query))
    assert str(caught.value).startswith("bar: ")
    if test.startswith("op "):
        assert "'op' must be int32" in str(caught.value) and "found int64" in str(caught.value)
    assert not (tmp_path / "out" / "data.parquet").exists()


def test_event_time_as_date(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_event_time_as_date``: a DATE event time is kept as a date (required)."""
    result = transform(
        tmp_path,
        foo,
        (None, "select cast(event_time as date) as event_time, city, population from foo"),
    )
    assert result.schema.field("event_time").type == pa.date32()
    assert rows(result) == expected_rows([n for _, n in CITIES], event_time=date(2023, 1, 1))
    assert result.new_data is not None and repetition(result.new_data.path) == ALL_REQUIRED


def test_event_time_coerced_to_millis(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_event_time_coerced_to_millis``: a naive nanosecond timestamp becomes
    milliseconds in UTC and stays REQUIRED."""
    query = (
        "select cast(cast(event_time as STRING) as TIMESTAMP) as event_time, city, population "
        "from foo"
    )
    result = transform(tmp_path, foo, (None, query))
    assert result.schema.field("event_time").type == TIMESTAMP_MS_UTC
    assert rows(result) == expected_rows([n for _, n in CITIES])
    assert result.new_data is not None and repetition(result.new_data.path) == ALL_REQUIRED


def test_ident_case_sensitivity(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_ident_case_sensitivity``: aliases keep their case, unquoted."""
    result = transform(
        tmp_path,
        foo,
        (None, "select event_time, city as City, population as Population from foo"),
    )
    assert result.new_data is not None
    assert repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "REQUIRED",
        "system_time": "REQUIRED",
        "event_time": "REQUIRED",
        "City": "REQUIRED",
        "Population": "REQUIRED",
    }
    assert rows(result) == expected_rows([n for _, n in CITIES])


def test_propagates_retractions_corrections(tmp_path: Path) -> None:
    """Restates ``test_propagates_retractions_corrections``: a query selecting ``op`` carries
    retractions and corrections through; ``op`` stays REQUIRED."""
    schema, path = write_input(
        tmp_path / "input.parquet",
        [
            (Op.APPEND, "vancouver", 675_000),
            (Op.CORRECT_FROM, "vancouver", 675_000),
            (Op.CORRECT_TO, "vancouver", 676_000),
            (Op.RETRACT, "vancouver", 676_000),
        ],
    )
    changes = TransformInputSlice(
        DatasetId.new_seeded(b"foo"), "foo", Vocab(), schema, (path,), (0, 3)
    )
    result = transform(
        tmp_path,
        changes,
        (None, "select op, event_time, city, population from foo"),
        inputs=(changes,),
    )
    assert [(r[0], r[1], r[5]) for r in rows(result)] == [
        (0, 0, 675_000),
        (1, 2, 675_000),
        (2, 3, 676_000),
        (3, 1, 676_000),
    ]
    assert result.new_data is not None and repetition(result.new_data.path) == ALL_REQUIRED


def test_outer_join_and_case_without_else_are_optional(
    foo: TransformInputSlice, tmp_path: Path
) -> None:
    """What DataFusion's plan cannot prove non-null is OPTIONAL, as the reference writes it: the
    other side of an outer join, a ``CASE`` without ``ELSE``; ``ROW_NUMBER()`` is a REQUIRED
    UInt64 (the reference's leaderboard ``place``)."""
    query = (
        "select a.event_time, b.city as other, case when a.population > 700000 then 1 end as big, "
        "row_number() over (order by a.population desc) as place from foo a "
        "left join foo b on a.city = b.city and b.population > 1000000"
    )
    result = transform(tmp_path, foo, (None, query))
    assert result.new_data is not None
    assert repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "REQUIRED",
        "system_time": "REQUIRED",
        "event_time": "REQUIRED",
        "other": "OPTIONAL",
        "big": "OPTIONAL",
        "place": "REQUIRED",
    }
    assert result.schema.field("place").type == pa.uint64()


def test_a_dataset_schema_keeps_its_declared_nullability(
    foo: TransformInputSlice, tmp_path: Path
) -> None:
    """A derivative written before nullability followed the plan (every data column optional)
    keeps its schema: new slices write those columns OPTIONAL, with the same logical hash."""
    required = transform(tmp_path, foo)
    old_schema = pa.schema(
        [f.with_nullable(True) if i > 2 else f for i, f in enumerate(required.schema)]
    )
    kept = transform(tmp_path, foo, dataset_schema=old_schema, out_dir=tmp_path / "kept")
    assert kept.schema == old_schema
    assert kept.new_data is not None and required.new_data is not None
    assert set(repetition(kept.new_data.path).values()) == {"REQUIRED", "OPTIONAL"}
    assert repetition(kept.new_data.path)["city"] == "OPTIONAL"
    assert kept.new_data.logical_hash == required.new_data.logical_hash


def test_json_extensions(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``test_json_extensions``: the JSON functions are registered; a call over
    literals is folded into a REQUIRED Int64 column."""
    query = """select event_time, json_get_int('{"foo": 123}', 'foo') as value from foo"""
    result = transform(tmp_path, foo, (None, query))
    assert result.new_data is not None
    assert [r[3:] for r in rows(result)] == [(EVENT_TIME, 123)] * 3
    assert repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "REQUIRED",
        "system_time": "REQUIRED",
        "event_time": "REQUIRED",
        "value": "REQUIRED",
    }


async def test_a_derivative_written_before_keeps_its_schema(workspace: Workspace) -> None:
    """Through the coordinator: a derivative whose ``SetDataSchema`` (as odfd wrote it before)
    makes a column optional that the plan proves non-null keeps it optional in new slices and
    commits no new schema; a new derivative of the same query declares it required. Both
    verify, with equal logical hashes."""
    nums = await root_with_slices(workspace, "nums", [[1, 2], [3]])
    assert nums.id is not None
    query = "SELECT event_time, 1 AS one, value FROM nums"
    transform = SetTransform(
        inputs=(TransformInput(dataset_ref=DatasetRef(nums.id), alias="nums"),),
        transform=TransformSql(engine="datafusion", queries=(SqlQueryStep(query=query),)),
    )
    hashes = []
    for alias, written_before in (("old", True), ("new", False)):
        dataset = await workspace.create_dataset(
            alias, DatasetKind.DERIVATIVE, [transform], system_time=T0
        )
        if written_before:
            every_optional = pa.schema(
                [
                    pa.field("offset", pa.int64(), False),
                    pa.field("op", pa.int32(), False),
                    pa.field("system_time", TIMESTAMP_MS_UTC, False),
                    pa.field("event_time", TIMESTAMP_MS_UTC),
                    pa.field("one", pa.int64()),
                    pa.field("value", pa.int64()),
                ]
            )
            await dataset.commit_event(
                SetDataSchema(
                    schema=arrow_schema.strip_encoding(
                        arrow_schema.schema_from_arrow(every_optional)
                    )
                ),
                expected_head=await dataset.chain.head(),
                system_time=T0,
            )
        await update_derivative(
            workspace, dataset, engines=Engines(), system_time=Timestamp.of(2024, 6, 1)
        )
        state = await dataset.chain.state()
        assert state.schema is not None
        declared = arrow_schema_of(state.schema)
        assert declared.field("one").nullable is written_before
        [slice_hash] = await all_slices(dataset)
        assert pq.read_schema(object_path(dataset.data, slice_hash)) == declared
        schemas = [
            b.event
            async for _, b in dataset.chain.iter_blocks()
            if isinstance(b.event, SetDataSchema)
        ]
        assert len(schemas) == 1
        report = await verify(workspace, [alias], VerifyOptions(jobs=1), engines=Engines())
        assert report.exit_code == 0
        hashes.append(logical_hash_parquet(object_path(dataset.data, slice_hash)))
    assert hashes[0] == hashes[1]


def test_result_optimal_parquet_encoding(foo: TransformInputSlice, tmp_path: Path) -> None:
    """Restates the encoding half of ``test_result_optimal_parquet_encoding``: one row group,
    every column SNAPPY-compressed, ``op`` and ``system_time`` (one value per slice)
    dictionary-encoded in data pages v1."""
    result = transform(tmp_path, foo)
    assert result.new_data is not None
    metadata = pq.ParquetFile(result.new_data.path).metadata
    assert metadata.num_row_groups == 1
    group = metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert {c.compression for c in columns.values()} == {"SNAPPY"}
    for name in ("op", "system_time"):
        assert "RLE_DICTIONARY" in columns[name].encodings, name
        assert columns[name].has_dictionary_page, name


# The reference engine's regression tests (tests/tests/test_regressions.rs), as pipelines.

CASES_VOCAB = Vocab(event_time="reported_date")


def write_cases(path: Path, ids: pa.Array, genders: pa.Array, start: int) -> TransformInputSlice:
    """A province's case records as the regression's input files hold them: ``id`` of the
    given integer type, ``gender`` required or not, ``age_group`` required, ``location`` and
    the event time ``reported_date`` optional."""
    n = len(ids)
    table = pa.table(
        {
            "reported_date": pa.array(
                [datetime(2020, 3, 10 + i % 2, tzinfo=UTC) for i in range(n)], TIMESTAMP_MS_UTC
            ),
            "id": ids,
            "gender": genders,
            "age_group": [f"{20 + 10 * (i % 5)}s" for i in range(n)],
            "location": [f"Zone {i % 3}" for i in range(n)],
        }
    )
    schema, written = write_batches(
        table.schema,
        iter(table.to_batches()),
        vocab=CASES_VOCAB,
        start_offset=start,
        system_time=INPUT_SYSTEM_TIME,
        out_path=path,
        required=frozenset({"age_group"} | ({"gender"} if genders.null_count == 0 else set())),
    )
    assert written is not None
    alias = path.stem
    return TransformInputSlice(
        DatasetId.new_seeded(alias.encode()),
        alias,
        CASES_VOCAB,
        schema,
        (written.path,),
        (start, start + n - 1),
    )


def test_issues_datafusion_6463(tmp_path: Path) -> None:
    """Restates ``test_issues_datafusion_6463``: a ``UNION ALL`` of two inputs whose columns
    differ in type (Int64 / Int32 ``id``) and nullability (``gender`` required in one) is
    written and reads back whole (20 records): ``id`` widened to Int64, ``gender`` OPTIONAL
    (one side may be null), the literal ``province`` REQUIRED. The reference's query reads
    the files as they are; as a pipeline, the inputs are datasets whose event time is
    ``reported_date``."""
    ab = write_cases(
        tmp_path / "ab.parquet",
        pa.array(range(500_000, 500_010), pa.int64()),
        pa.array(["F", "M"] * 5, pa.string()),
        10,
    )
    bc = write_cases(
        tmp_path / "bc.parquet",
        pa.array(range(1, 11), pa.int32()),
        pa.array(["F", None] * 5, pa.string()),
        10,
    )
    assert not ab.schema.field("gender").nullable and bc.schema.field("gender").nullable
    query = """
        SELECT * FROM (
            SELECT 'AB' as province, id, reported_date, gender, location FROM ab
            UNION ALL
            SELECT 'BC' as province, id, reported_date, gender, location FROM bc
        )
    """
    result = transform(tmp_path, ab, (None, query), inputs=(ab, bc), vocab=CASES_VOCAB)
    assert result.new_data is not None
    table = pq.read_table(result.new_data.path)
    assert table.num_rows == 20
    assert table.column("province").to_pylist() == ["AB"] * 10 + ["BC"] * 10
    assert table.column("id").to_pylist() == [*range(500_000, 500_010), *range(1, 11)]
    assert result.schema.field("id").type == pa.int64()
    assert repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "REQUIRED",
        "system_time": "REQUIRED",
        "reported_date": "OPTIONAL",
        "province": "REQUIRED",
        "id": "OPTIONAL",
        "gender": "OPTIONAL",
        "location": "OPTIONAL",
    }
    assert logical_hash_parquet(result.new_data.path) == result.new_data.logical_hash


@pytest.mark.spark
def test_issues_arrow_4308(spark, tmp_path: Path) -> None:
    """Restates ``test_issues_arrow_4308``: a file Spark's Parquet writer (parquet-mr) wrote,
    with millisecond timestamps adjusted to UTC and no Arrow schema in its footer, is read by
    DataFusion with ``system_time`` as Timestamp(ms, UTC). The reference's fixture was written
    by parquet-mr 1.10, which stored the legacy converted type only; today's Spark (and
    pyarrow) store the logical type as well, so the converted-type-only case itself is not
    restated (see docs/differences-from-kamu-cli.md)."""
    folder = tmp_path / "spark"
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
    try:
        spark.sql(
            "SELECT id AS offset, timestamp_millis(1685394131331) AS system_time, "
            "timestamp_millis(1607817600000 + id * 86400000) AS date_reported, "
            "'Edmonton Zone' AS zone FROM range(10)"
        ).coalesce(1).write.parquet(str(folder))
    finally:
        spark.conf.unset("spark.sql.parquet.outputTimestampType")
    [path] = folder.glob("*.parquet")
    assert b"ARROW:schema" not in pq.ParquetFile(path).metadata.metadata
    result = ENGINE.query(
        [SqlQueryStep(query="select * from cases")], [QueryTable("cases", (path,), None)]
    )
    assert result.schema.field("system_time").type == TIMESTAMP_MS_UTC
    assert result.schema.field("date_reported").type == TIMESTAMP_MS_UTC
    assert result.num_rows == 10


def test_issues_datafusion_14281(tmp_path: Path) -> None:
    """Restates ``test_issues_datafusion_14281``: an input slice whose file stores ``city`` as
    Utf8View (as DataFusion writes it) under a dataset schema saying Utf8, with an optional
    Int32 ``population``; ``cast(population * 10 as int)`` runs, the input's watermark is
    the output's, and the result keeps the plan's nullability."""
    input_time = datetime(2050, 1, 1, 12, tzinfo=UTC)
    data = pa.table(
        {
            "op": pa.array([0, 0, 0], pa.int32()),
            "event_time": pa.array([input_time] * 3, TIMESTAMP_MS_UTC),
            "city": pa.array(["A", "B", "C"], pa.string_view()),
            "population": pa.array([10, 20, 30], pa.int32()),
        }
    )
    schema, written = write_batches(
        data.schema,
        iter(data.to_batches()),
        vocab=Vocab(),
        start_offset=0,
        system_time=Timestamp.from_datetime(input_time),
        out_path=tmp_path / "data.parquet",
        required=frozenset({"event_time"}),
    )
    assert written is not None
    assert pq.read_schema(written.path).field("city").type == pa.string_view()
    plain = schema.set(schema.get_field_index("city"), pa.field("city", pa.string()))
    watermark = Timestamp.from_datetime(input_time)
    root = TransformInputSlice(
        DatasetId.new_seeded(b"foo"),
        "root",
        Vocab(),
        plain,
        (written.path,),
        (0, 2),
        explicit_watermarks=(Watermark(system_time=watermark, event_time=watermark),),
    )
    query = """
        SELECT
            op,
            event_time,
            city,
            cast(population * 10 as int) as population_x10
        FROM root
    """
    result = transform(
        tmp_path,
        root,
        (None, query),
        inputs=(root,),
        dataset_alias="deriv",
        system_time=Timestamp.parse_rfc3339("2050-01-02T12:00:00Z"),
    )
    assert result.new_data is not None
    assert (result.new_data.offset_start, result.new_data.offset_end) == (0, 2)
    assert result.new_watermark == watermark
    assert [r[4:] for r in rows(result)] == [("A", 100), ("B", 200), ("C", 300)]
    assert result.schema.field("city").type == pa.string()
    assert result.schema.field("population_x10").type == pa.int32()
    assert repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "REQUIRED",
        "system_time": "REQUIRED",
        "event_time": "REQUIRED",
        "city": "OPTIONAL",
        "population_x10": "OPTIONAL",
    }
