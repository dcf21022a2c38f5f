"""Nullability of Spark transform results, as the reference's Spark engine writes it.

The reference engine (``kamu-data/kamu-engine-spark``, ``Transform.scala``) reads its inputs
with Spark's Parquet reader, which makes every column nullable, and writes the result with
Spark's Parquet writer, which writes a column REQUIRED when Spark's plan proves it non-null (a
literal, ``row_number()``, the ``op`` it adds) and OPTIONAL otherwise. The first test restates
its ``EngineMapTest`` "Map - basic"; the others check the same rule on a join, a literal,
``row_number()``, an input without records and a dataset written before. All share the test
session's Spark.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.identity import DatasetId
from protocol.model import SqlQueryStep, Timestamp, TransformSql, Watermark
from verifier.engine.columns import Op, Vocab
from verifier.engine.contract import TransformInputSlice, TransformRequest, TransformResult
from verifier.engine.output import TIMESTAMP_MS_UTC, write_batches
from verifier.engine.spark.transform import execute_transform

pytestmark = pytest.mark.spark

INPUT_ID = DatasetId.new_seeded(b"in")


def t(minute: int) -> datetime:
    """The reference test's ``t(n)``: 2000-01-01 at minute ``n``."""
    return datetime(2000, 1, 1, 0, minute, tzinfo=UTC)


def ts(minute: int) -> Timestamp:
    return Timestamp.parse_rfc3339(t(minute).isoformat())


#: The reference test's input: four ticks, written with every column REQUIRED (the reference
#: reads them as nullable whatever the file says).
TICKS = [(Op.APPEND, t(1), "A", 10), (Op.APPEND, t(1), "B", 20)]
TICKS += [(Op.APPEND, t(2), "A", 11), (Op.APPEND, t(2), "B", 21)]


def repetition(path: Path) -> dict[str, str]:
    """Each column's Parquet repetition, as the reference's tests print the file's schema."""
    schema = pq.ParquetFile(path).metadata.schema
    return {
        schema.column(i).name: "OPTIONAL" if schema.column(i).max_definition_level else "REQUIRED"
        for i in range(len(schema))
    }


@pytest.fixture(scope="module")
def ticks(tmp_path_factory: pytest.TempPathFactory) -> TransformInputSlice:
    table = pa.table(
        {
            "op": pa.array([int(op) for op, *_ in TICKS], pa.int32()),
            "event_time": pa.array([e for _, e, _, _ in TICKS], TIMESTAMP_MS_UTC),
            "symbol": [s for _, _, s, _ in TICKS],
            "value": pa.array([v for *_, v in TICKS], pa.int64()),
        }
    )
    schema, written = write_batches(
        table.schema,
        iter(table.to_batches()),
        vocab=Vocab(),
        start_offset=0,
        system_time=ts(5),
        out_path=tmp_path_factory.mktemp("in") / "ticks.parquet",
        required=frozenset({"event_time", "symbol", "value"}),
    )
    assert written is not None
    return TransformInputSlice(
        INPUT_ID,
        "in",
        Vocab(),
        schema,
        (written.path,),
        (0, 3),
        (Watermark(system_time=ts(5), event_time=ts(2)),),
    )


def transform(
    tmp_path: Path, inputs: TransformInputSlice, query: str, **changes: object
) -> TransformResult:
    request = TransformRequest(
        dataset_alias="out",
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=query),)),
        vocab=Vocab(),
        system_time=ts(10),
        next_offset=0,
        inputs=(inputs,),
        prev_checkpoint=None,
        out_dir=tmp_path / "out",
    )
    return execute_transform(dataclasses.replace(request, **changes))  # type: ignore[arg-type]


def test_map_basic(ticks: TransformInputSlice, tmp_path: Path) -> None:
    """Restates ``EngineMapTest`` "Map - basic" (first transaction): the rows, offsets and
    watermark, and the file's schema: ``op``, ``event_time`` and the data columns the query
    takes from the input are OPTIONAL, the system columns REQUIRED."""
    query = "SELECT op, event_time, symbol, value * 10 AS value FROM `in`"
    result = transform(tmp_path, ticks, query)
    assert result.new_data is not None
    table = pq.read_table(result.new_data.path)
    assert [tuple(r.values()) for r in table.to_pylist()] == [
        (0, 0, t(10), t(1), "A", 100),
        (1, 0, t(10), t(1), "B", 200),
        (2, 0, t(10), t(2), "A", 110),
        (3, 0, t(10), t(2), "B", 210),
    ]
    assert repetition(result.new_data.path) == {
        "offset": "REQUIRED",
        "op": "OPTIONAL",
        "system_time": "REQUIRED",
        "event_time": "OPTIONAL",
        "symbol": "OPTIONAL",
        "value": "OPTIONAL",
    }
    assert (result.new_data.offset_start, result.new_data.offset_end) == (0, 3)
    assert result.new_watermark == ts(2)
    assert result.schema == table.schema


PLANNED = (
    "SELECT a.event_time, 1 AS one, row_number() OVER (ORDER BY a.value) AS place, "
    "a.symbol, b.value AS other FROM `in` a LEFT JOIN `in` b "
    "ON a.symbol = b.symbol AND a.event_time = b.event_time AND b.value > 20"
)
PLANNED_REPETITION = {
    "offset": "REQUIRED",
    "op": "REQUIRED",
    "system_time": "REQUIRED",
    "event_time": "OPTIONAL",
    "one": "REQUIRED",
    "place": "REQUIRED",
    "symbol": "OPTIONAL",
    "other": "OPTIONAL",
}


def test_literal_and_row_number_are_required(ticks: TransformInputSlice, tmp_path: Path) -> None:
    """What Spark's plan proves non-null is REQUIRED (a literal, ``row_number()``, the ``op``
    added for a query without one); a column of a required input column and the other side of
    an outer join are OPTIONAL. The slice and the schema the dataset declares agree."""
    result = transform(tmp_path, ticks, PLANNED)
    assert result.new_data is not None
    assert repetition(result.new_data.path) == PLANNED_REPETITION
    assert pq.read_schema(result.new_data.path) == result.schema
    assert [r["other"] for r in pq.read_table(result.new_data.path).to_pylist()] == [
        None,
        None,
        None,
        21,
    ]


def test_an_input_without_records_gives_the_same_schema(
    ticks: TransformInputSlice, tmp_path: Path
) -> None:
    """An input without new records reads as nullable too: the dataset's schema does not
    depend on whether a transaction had input."""
    empty = dataclasses.replace(ticks, offset_interval=None, data_paths=())
    result = transform(tmp_path, empty, PLANNED)
    assert result.new_data is None
    assert {f.name: "OPTIONAL" if f.nullable else "REQUIRED" for f in result.schema} == (
        PLANNED_REPETITION
    )


def test_a_dataset_schema_keeps_its_declared_nullability(
    ticks: TransformInputSlice, tmp_path: Path
) -> None:
    """A derivative written before Spark results kept their plan's nullability (every data
    column optional) keeps its schema: new slices write those columns OPTIONAL, with the same
    logical hash."""
    planned = transform(tmp_path, ticks, PLANNED)
    old_schema = pa.schema(
        [f.with_nullable(True) if i > 2 else f for i, f in enumerate(planned.schema)]
    )
    kept = transform(tmp_path, ticks, PLANNED, dataset_schema=old_schema, out_dir=tmp_path / "k")
    assert kept.schema == old_schema
    assert kept.new_data is not None and planned.new_data is not None
    assert pq.read_schema(kept.new_data.path) == old_schema
    assert repetition(kept.new_data.path)["one"] == "OPTIONAL"
    assert kept.new_data.logical_hash == planned.new_data.logical_hash
