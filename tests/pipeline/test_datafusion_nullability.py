"""Nullability inside columns (struct fields, list items, map values) of DataFusion results, and
the nullability of streamed query results.

The reference's DataFusion engine writes its plan's schema with DataFusion's Parquet writer,
which keeps the plan's nullability at every depth: a struct field or list item read from a
required input field stays REQUIRED, while ``named_struct``, ``struct``, ``make_array`` and
``array_agg`` declare theirs nullable. odfd writes the same in the Parquet file and in
``SetDataSchema``; the logical hash does not depend on it. No JVM is started.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol import arrow_schema
from protocol.hashing.errors import UnsupportedDataTypeError
from protocol.identity import DatasetId
from protocol.model import (
    DataType,
    DataTypeList,
    DataTypeOption,
    DataTypeStruct,
    SqlQueryStep,
    Timestamp,
    TransformSql,
)
from tests.pipeline.conftest import parquet_repetition
from verifier.engine.columns import Vocab
from verifier.engine.contract import QueryTable, TransformInputSlice, TransformRequest
from verifier.engine.datafusion import session as session_module
from verifier.engine.datafusion.engine import DataFusionEngine
from verifier.engine.datafusion.session import QuerySession
from verifier.engine.output import TIMESTAMP_MS_UTC, NullValuesError, write_batches

ENGINE = DataFusionEngine()
SYSTEM_TIME = Timestamp.of(2024, 3, 1)

POINT = pa.struct([pa.field("x", pa.int64(), False), pa.field("label", pa.string())])
IDS = pa.list_(pa.field("item", pa.int64(), False))
SHAPE = pa.struct([pa.field("name", pa.string(), False), pa.field("ids", IDS)])
INPUT_SCHEMA = pa.schema(
    [
        pa.field("event_time", TIMESTAMP_MS_UTC, False),
        pa.field("a", pa.int64(), False),
        pa.field("b", pa.int64()),
        pa.field("point", POINT, False),
        pa.field("ids", IDS, False),
        pa.field("shape", SHAPE),
    ]
)
INPUT = pa.table(
    {
        "event_time": pa.array([0, 1000], TIMESTAMP_MS_UTC),
        "a": [1, 2],
        "b": [None, 20],
        "point": [{"x": 1, "label": None}, {"x": 2, "label": "two"}],
        "ids": [[1], [2, 3]],
        "shape": [{"name": "s", "ids": [4, 5]}, None],
    },
    schema=INPUT_SCHEMA,
)


@pytest.fixture(scope="module")
def foo(tmp_path_factory: pytest.TempPathFactory) -> TransformInputSlice:
    """Two records whose nested fields are required where the schema says so."""
    schema, written = write_batches(
        INPUT.schema,
        iter(INPUT.to_batches()),
        vocab=Vocab(),
        start_offset=0,
        system_time=Timestamp.of(2024, 1, 1),
        out_path=tmp_path_factory.mktemp("foo") / "input.parquet",
        required=frozenset(f.name for f in INPUT_SCHEMA if not f.nullable),
    )
    assert written is not None
    assert schema.field("shape").type == SHAPE  # the input is as declared, at every depth
    return TransformInputSlice(
        DatasetId.new_seeded(b"foo"), "foo", Vocab(), schema, (written.path,), (0, 1)
    )


def transform(tmp_path: Path, foo: TransformInputSlice, query: str, **changes: object):
    request = TransformRequest(
        dataset_alias="bar",
        transform=TransformSql(engine="datafusion", queries=(SqlQueryStep(query=query),)),
        vocab=Vocab(),
        system_time=SYSTEM_TIME,
        next_offset=0,
        inputs=(foo,),
        prev_checkpoint=None,
        out_dir=tmp_path / "out",
    )
    return ENGINE.run_transform(dataclasses.replace(request, **changes))  # type: ignore[arg-type]


def odf_nullability(data_type: DataType, path: str) -> dict[str, bool]:
    """Whether each level of an ODF (``SetDataSchema``) type is wrapped in ``Option``."""
    optional = isinstance(data_type, DataTypeOption)
    inner = data_type.inner if isinstance(data_type, DataTypeOption) else data_type
    found = {path: optional}
    if isinstance(inner, DataTypeStruct):
        for field in inner.fields:
            found |= odf_nullability(field.type, f"{path}.{field.name}")
    elif isinstance(inner, DataTypeList):
        found |= odf_nullability(inner.item_type, f"{path}[]")
    return found


def declared(schema: pa.Schema, column: str) -> dict[str, bool]:
    """The nullability ``SetDataSchema`` gives ``column`` at every depth (``True``: optional)."""
    odf = arrow_schema.schema_from_arrow(schema)
    [field] = [f for f in odf.fields if f.name == column]
    return odf_nullability(field.type, column)


def test_nested_fields_read_from_required_ones_stay_required(
    foo: TransformInputSlice, tmp_path: Path
) -> None:
    """A struct or list column selected from the input keeps its nullability at every depth;
    a field taken out of a struct keeps the field's, under the struct's."""
    query = (
        "select event_time, point, ids, shape, point['x'] as x, point['label'] as label, "
        "shape['name'] as name from foo"
    )
    result = transform(tmp_path, foo, query)
    assert result.new_data is not None
    assert parquet_repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "REQUIRED",
        "system_time": "REQUIRED",
        "event_time": "REQUIRED",
        "point": "REQUIRED",
        "point.x": "REQUIRED",
        "point.label": "OPTIONAL",
        "ids": "REQUIRED",
        "ids.list": "REPEATED",
        "ids.list.element": "REQUIRED",
        "shape": "OPTIONAL",
        "shape.name": "REQUIRED",
        "shape.ids": "OPTIONAL",
        "shape.ids.list": "REPEATED",
        "shape.ids.list.element": "REQUIRED",
        "x": "REQUIRED",
        "label": "OPTIONAL",
        "name": "OPTIONAL",
    }
    assert pq.read_schema(result.new_data.path) == result.schema
    assert declared(result.schema, "point") == {
        "point": False,
        "point.x": False,
        "point.label": True,
    }
    assert declared(result.schema, "shape") == {
        "shape": True,
        "shape.name": False,
        "shape.ids": True,
        "shape.ids[]": False,
    }
    assert pq.read_table(result.new_data.path).column("shape").to_pylist() == [
        {"name": "s", "ids": [4, 5]},
        None,
    ]


CONSTRUCTED = (
    "select event_time, named_struct('a', a, 'b', b) as pair, struct(a) as wrapped, "
    "make_array(a, a) as twice, array_agg(a) over (order by a) as so_far, "
    "named_struct('ids', make_array(a), 'at', point) as nest from foo"
)


def test_constructed_structs_and_lists_are_as_the_plan_declares(
    foo: TransformInputSlice, tmp_path: Path
) -> None:
    """``named_struct``, ``struct``, ``make_array`` and ``array_agg`` declare their fields and
    items nullable in DataFusion's plan (even over required columns), and the reference writes
    them so: OPTIONAL, in the file and in ``SetDataSchema``; a required input struct put in a
    constructed one keeps its own fields' nullability."""
    result = transform(tmp_path, foo, CONSTRUCTED)
    assert result.new_data is not None
    assert {
        k: v
        for k, v in parquet_repetition(result.new_data.path).items()
        if k.split(".")[0] not in ("offset", "op", "system_time", "event_time")
    } == {
        "pair": "OPTIONAL",
        "pair.a": "OPTIONAL",
        "pair.b": "OPTIONAL",
        "wrapped": "OPTIONAL",
        "wrapped.c0": "OPTIONAL",
        "twice": "OPTIONAL",
        "twice.list": "REPEATED",
        "twice.list.element": "OPTIONAL",
        "so_far": "OPTIONAL",
        "so_far.list": "REPEATED",
        "so_far.list.element": "OPTIONAL",
        "nest": "OPTIONAL",
        "nest.ids": "OPTIONAL",
        "nest.ids.list": "REPEATED",
        "nest.ids.list.element": "OPTIONAL",
        "nest.at": "OPTIONAL",
        "nest.at.x": "REQUIRED",
        "nest.at.label": "OPTIONAL",
    }
    assert declared(result.schema, "nest") == {
        "nest": True,
        "nest.ids": True,
        "nest.ids[]": True,
        "nest.at": True,
        "nest.at.x": False,
        "nest.at.label": True,
    }
    assert pq.read_schema(result.new_data.path) == result.schema
    table = pq.read_table(result.new_data.path)
    assert table.column("so_far").to_pylist() == [[1], [1, 2]]
    assert table.column("nest").to_pylist()[1] == {"ids": [2], "at": {"x": 2, "label": "two"}}


def test_structs_in_lists_are_refused_as_unhashable(
    foo: TransformInputSlice, tmp_path: Path
) -> None:
    """A list of structs has no encoding in arrow-digest's logical hash, so neither the
    reference nor odfd can commit one; the transaction fails naming the column, nothing is
    written. (Their nullability as streamed: ``test_streamed_structs_in_lists``.)"""
    with pytest.raises(UnsupportedDataTypeError, match="column 'points'.*lists of structs"):
        transform(tmp_path, foo, "select event_time, array_agg(point) over () as points from foo")
    assert not (tmp_path / "out" / "data.parquet").exists()


def test_logical_hash_does_not_depend_on_nested_nullability(
    foo: TransformInputSlice, tmp_path: Path
) -> None:
    """A dataset whose schema makes every nested field optional (as odfd wrote them before
    nested fields followed the plan) keeps that schema at every depth; its slices hold the
    same records with the same logical hash as the ones written with required nested fields."""
    query = "select event_time, point, ids, shape from foo"
    required = transform(tmp_path, foo, query)
    all_optional = pa.schema(
        [
            required.schema.field(i) if i < 4 else _all_optional(required.schema.field(i))
            for i in range(len(required.schema))
        ]
    )
    kept = transform(tmp_path, foo, query, dataset_schema=all_optional, out_dir=tmp_path / "kept")
    assert kept.schema == all_optional
    assert kept.new_data is not None and required.new_data is not None
    assert set(parquet_repetition(kept.new_data.path).values()) == {
        "REQUIRED",
        "OPTIONAL",
        "REPEATED",
    }
    assert parquet_repetition(kept.new_data.path)["shape.ids.list.element"] == "OPTIONAL"
    assert parquet_repetition(required.new_data.path)["shape.ids.list.element"] == "REQUIRED"
    assert declared(kept.schema, "ids") == {"ids": True, "ids[]": True}
    assert kept.new_data.logical_hash == required.new_data.logical_hash
    assert pq.read_table(kept.new_data.path).equals(
        pq.read_table(required.new_data.path).cast(all_optional)
    )


def _all_optional(field: pa.Field) -> pa.Field:
    data_type = field.type
    if pa.types.is_struct(data_type):
        data_type = pa.struct(
            [_all_optional(data_type.field(i)) for i in range(data_type.num_fields)]
        )
    elif pa.types.is_list(data_type):
        data_type = pa.list_(_all_optional(data_type.value_field))
    return field.with_type(data_type).with_nullable(True)


@pytest.mark.parametrize(
    ("column", "declared_type", "query", "where"),
    [
        (
            "pair",
            pa.struct([pa.field("a", pa.int64(), False), pa.field("b", pa.int64(), False)]),
            "select event_time, named_struct('a', a, 'b', b) as pair from foo",
            "pair.b",
        ),
        (
            "both",
            pa.list_(pa.field("item", pa.int64(), False)),
            "select event_time, make_array(a, b) as both from foo",
            "both[]",
        ),
    ],
)
def test_a_declared_required_nested_field_refuses_nulls(
    foo: TransformInputSlice,
    tmp_path: Path,
    column: str,
    declared_type: pa.DataType,
    query: str,
    where: str,
) -> None:
    """Where the dataset's schema makes a nested field required, a null in it fails the
    transaction naming the field, as a null in a required column does; nothing is written."""
    schema = pa.schema(
        [
            pa.field("offset", pa.int64(), False),
            pa.field("op", pa.int32(), False),
            pa.field("system_time", TIMESTAMP_MS_UTC, False),
            pa.field("event_time", TIMESTAMP_MS_UTC, False),
            pa.field(column, declared_type),
        ]
    )
    with pytest.raises(NullValuesError) as caught:
        transform(tmp_path, foo, query, dataset_schema=schema)
    assert str(caught.value) == f"Column `{where}` contains 1 null values while none were expected"
    assert not (tmp_path / "out" / "data.parquet").exists()
    fine = transform(
        tmp_path,
        foo,
        query.replace(", b)", ", a)"),
        dataset_schema=schema,
        out_dir=tmp_path / "fine",
    )
    assert fine.schema.field(column).type == declared_type


# StreamingQuery: the frames a kept session streams (Flight SQL, the query API)


@pytest.fixture(params=["in memory", "files"])
def session(foo: TransformInputSlice, request: pytest.FixtureRequest):
    """A session that reads its small tables into memory (the query API's), and one that scans
    their files."""
    session = QuerySession(in_memory_bytes=1 << 20 if request.param == "in memory" else 0)
    session.register(QueryTable("foo", foo.data_paths, foo.schema), "v1")
    yield session
    session.close()


async def _stream(session: QuerySession, sql: str) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    stream = session.plan(sql).stream()
    stream.start()
    batches = []
    try:
        while (batch := await stream.next_batch()) is not None:
            batches.append(batch)
    finally:
        stream.close()
    return stream.schema, batches


@pytest.mark.parametrize(
    "query",
    [
        "select event_time, a, b, point, shape, a + 1 as more from foo",
        CONSTRUCTED,
        """select event_time, json_get_int('{"k": 1}', 'k') as folded from foo""",
        "select event_time, row_number() over (order by a) as place from foo",
    ],
)
@pytest.mark.parametrize("empty", [False, True], ids=["rows", "no rows"])
async def test_streamed_frames_carry_the_written_nullability(
    foo: TransformInputSlice, session: QuerySession, tmp_path: Path, query: str, empty: bool
) -> None:
    """A streamed query's schema, and every frame's, is the schema a transform of the same
    query writes (its data columns), at every depth, also when the result has no rows."""
    if empty:
        query += " where a > 100"
    schema, batches = await _stream(session, query)
    written = transform(tmp_path, foo, query).schema
    assert schema == pa.schema(list(written)[3:])
    assert all(batch.schema == schema for batch in batches)
    assert sum(batch.num_rows for batch in batches) == (0 if empty else 2)


async def test_streamed_structs_in_lists(session: QuerySession) -> None:
    """Structs in lists (which no slice can hold, being unhashable) stream with the plan's
    nullability: ``array_agg`` items are nullable, a struct read from the input keeps its
    fields' nullability, ``named_struct``'s are nullable."""
    schema, batches = await _stream(
        session,
        "select array_agg(point) as points, array_agg(named_struct('a', a)) as pairs from foo",
    )
    points, pairs = schema.field("points").type, schema.field("pairs").type
    assert points.value_field.nullable and points.value_type == POINT
    assert pairs.value_field.nullable and pairs.value_type.field("a").nullable
    assert [batch.schema for batch in batches] == [schema]
    assert batches[0].column(0).to_pylist() == [INPUT.column("point").to_pylist()]


async def test_files_unlike_the_table_schema_are_scanned(foo: TransformInputSlice) -> None:
    """A small table whose files do not hold exactly its schema (here a column added later) is
    not read into memory: the scan of its files fills the missing column, as for a large one."""
    assert foo.schema is not None
    wider = foo.schema.append(pa.field("added", pa.string()))
    table = QueryTable("wider", foo.data_paths, wider)
    assert session_module._small_table(table, 1 << 20) is None
    assert session_module._small_table(QueryTable("foo", foo.data_paths, foo.schema), 1 << 20)
    session = QuerySession(in_memory_bytes=1 << 20)
    try:
        session.register(table, "v1")
        _, batches = await _stream(session, "select a, added from wider order by a")
    finally:
        session.close()
    assert [row["added"] for batch in batches for row in batch.to_pylist()] == [None, None]


@pytest.mark.parametrize(
    ("query", "bounded"),
    [
        ("select event_time, a + 1 as more from foo where a > 0", True),
        ("select a, count(*) as n from foo group by a order by n limit 1", True),
        ("select 1 as one", True),
        ("select sum(value) as s from generate_series(1, 100000000000)", False),
        ("select x.a from foo x join foo y on x.a = y.a", False),
        ("select a from foo where a > (select max(value) from generate_series(1, 10))", False),
        ("select (select sum(value) from generate_series(1, 10)) as s", False),
        ("select event_time, row_number() over (order by a) as place from foo", False),
        ("select unnest([a, a]) as twice from foo", False),
    ],
)
async def test_bounded_queries_collect_what_they_stream(
    session: QuerySession, query: str, bounded: bool
) -> None:
    """Only a query that filters, projects, sorts, aggregates or limits rows held in memory (no
    table function, join, window, unnest or subquery) may be run whole by ``PlannedQuery.collect``, which
    cannot be stopped half way; its rows and schema are those it streams."""
    planned = session.plan(query)
    in_memory = session._in_memory_bytes > 0
    assert planned.bounded is (bounded and (in_memory or "from foo" not in query))
    if not planned.bounded:
        return
    collected = planned.collect()
    schema, streamed = await _stream(session, query)
    assert [batch.schema for batch in collected] == [schema] * len(collected)
    assert pa.Table.from_batches(collected, schema) == pa.Table.from_batches(streamed, schema)
    assert pa.Table.from_batches(collected, schema).num_rows >= 1
