"""The Spark transform engine on its own: inputs in, one deterministic slice + checkpoint out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.identity import DatasetId
from protocol.model import SqlQueryStep, TemporalTable, Timestamp, TransformSql, Watermark
from verifier.engine.columns import Vocab
from verifier.engine.contract import TransformInputSlice, TransformRequest
from verifier.engine.errors import (
    InvalidQueryError,
    NonDeterministicQueryError,
    QueryExecutionError,
    TransformError,
    UnsupportedTransformError,
)
from verifier.engine.spark.checkpoint import read_checkpoint
from verifier.engine.spark.output import write_slice
from verifier.engine.spark.transform import execute_transform

pytestmark = pytest.mark.spark

T0 = Timestamp.of(2024, 1, 1)
LEFT_ID = DatasetId.new_seeded(b"left")
RIGHT_ID = DatasetId.new_seeded(b"right")


def _slices(
    spark, tmp_path: Path, name: str, query: str, splits: list[int]
) -> tuple[pa.Schema, list[Path], int]:
    """Writes ``query``'s rows as consecutive slices of the given sizes (like several ingests)."""
    df = spark.sql(query)
    rows = df.count()
    assert sum(splits) == rows
    paths, start, schema = [], 0, None
    for n, size in enumerate(splits):
        part = df.where(f"seq >= {start} AND seq < {start + size}").orderBy("seq").drop("seq")
        schema, written = write_slice(
            part,
            vocab=Vocab(),
            start_offset=start,
            system_time=T0,
            out_path=tmp_path / f"{name}-{n}.parquet",
        )
        paths.append(written.path)
        start += size
    return schema, paths, rows


def _request(
    tmp_path: Path, query: str, inputs: tuple[TransformInputSlice, ...], out: str, **kw
) -> TransformRequest:
    return TransformRequest(
        dataset_alias="out",
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=query),)),
        vocab=Vocab(),
        system_time=Timestamp.of(2024, 3, 1),
        next_offset=kw.pop("next_offset", 0),
        inputs=inputs,
        prev_checkpoint=kw.pop("prev_checkpoint", None),
        out_dir=tmp_path / out,
        **kw,
    )


SCORES = (
    "SELECT id AS seq, CAST(id % 4 AS INT) AS op, timestamp_millis(1700000000000 + id * 1000) AS event_time, "
    "concat('p', CAST(id % 13 AS STRING)) AS player, (id * 7919) % 1000 AS score FROM range(0, 3000)"
)


def test_same_inputs_give_the_same_records_however_the_input_was_sliced(
    spark, tmp_path: Path
) -> None:
    query = (
        "SELECT max(event_time) AS event_time, player, sum(score) AS total, avg(score / 7.0) AS mean "
        "FROM scores WHERE op IN (0, 3) GROUP BY player"
    )
    hashes = set()
    for n, splits in enumerate([[3000], [1000, 1000, 1000], [7, 2000, 993]]):
        schema, paths, rows = _slices(spark, tmp_path, f"in{n}", SCORES, splits)
        source = TransformInputSlice(
            LEFT_ID, "scores", Vocab(), schema, tuple(paths), (0, rows - 1)
        )
        result = execute_transform(_request(tmp_path, query, (source,), f"out{n}"))
        hashes.add(result.new_data.logical_hash)
    assert len(hashes) == 1


def test_map_filter_keeps_input_order_and_operation_types(spark, tmp_path: Path) -> None:
    schema, paths, rows = _slices(spark, tmp_path, "in", SCORES, [500, 1500, 1000])
    source = TransformInputSlice(LEFT_ID, "scores", Vocab(), schema, tuple(paths), (400, 2599))
    query = (
        "SELECT op, event_time, player, score * 2 AS double_score FROM scores WHERE score % 2 = 0"
    )
    result = execute_transform(_request(tmp_path, query, (source,), "out", next_offset=100))
    table = pq.read_table(result.new_data.path)
    expected = (
        pa.concat_tables([pq.read_table(p) for p in paths])
        .filter(pa.compute.field("offset") >= 400)
        .filter(pa.compute.field("offset") <= 2599)
        .filter(pa.compute.equal(pa.compute.bit_wise_and(pa.compute.field("score"), 1), 0))
    )
    assert table.column_names == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "player",
        "double_score",
    ]
    assert table.column("op").to_pylist() == expected.column("op").to_pylist()
    assert table.column("event_time").to_pylist() == expected.column("event_time").to_pylist()
    assert table.column("offset").to_pylist() == list(range(100, 100 + expected.num_rows))
    assert (result.new_data.offset_start, result.new_data.offset_end) == (
        100,
        99 + expected.num_rows,
    )


def test_join_of_two_inputs_with_multi_step_queries(spark, tmp_path: Path) -> None:
    left_schema, left_paths, left_rows = _slices(spark, tmp_path, "l", SCORES, [3000])
    right_schema, right_paths, right_rows = _slices(
        spark,
        tmp_path,
        "r",
        "SELECT id AS seq, 0 AS op, timestamp_millis(0) AS event_time, concat('p', CAST(id AS STRING)) AS player, "
        "CAST(id AS INT) AS level FROM range(0, 13)",
        [13],
    )
    inputs = (
        TransformInputSlice(
            LEFT_ID, "scores", Vocab(), left_schema, tuple(left_paths), (0, left_rows - 1)
        ),
        TransformInputSlice(
            RIGHT_ID, "players", Vocab(), right_schema, tuple(right_paths), (0, right_rows - 1)
        ),
    )
    transform = TransformSql(
        engine="Spark",
        queries=(
            SqlQueryStep(
                alias="best",
                query="SELECT player, max(score) AS best, max(event_time) AS event_time FROM scores GROUP BY player",
            ),
            SqlQueryStep(
                query="SELECT b.event_time, b.player, p.level, b.best FROM best b JOIN players p ON p.player = b.player"
            ),
        ),
    )
    request = dataclasses.replace(_request(tmp_path, "", inputs, "a"), transform=transform)
    first = execute_transform(request)
    again = execute_transform(dataclasses.replace(request, out_dir=tmp_path / "b"))
    assert first.new_data.num_records == 13
    assert first.new_data.logical_hash == again.new_data.logical_hash
    assert first.new_data.physical_hash == again.new_data.physical_hash


def test_watermarks_come_from_inputs_and_the_checkpoint(spark, tmp_path: Path) -> None:
    schema, paths, rows = _slices(spark, tmp_path, "in", SCORES, [3000])
    left = TransformInputSlice(
        LEFT_ID,
        "scores",
        Vocab(),
        schema,
        tuple(paths),
        (0, rows - 1),
        (
            Watermark(system_time=T0, event_time=Timestamp.of(2023, 11, 1)),
            Watermark(system_time=T0, event_time=Timestamp.of(2023, 11, 5)),
        ),
    )
    right = TransformInputSlice(RIGHT_ID, "other", Vocab(), schema, (), None)
    query = "SELECT event_time, player FROM scores UNION ALL SELECT event_time, player FROM other"
    first = execute_transform(_request(tmp_path, query, (left, right), "one"))
    assert first.new_watermark is None  # the second input has no watermark yet
    assert read_checkpoint(first.new_checkpoint.path) == {LEFT_ID: Timestamp.of(2023, 11, 5)}

    right_wm = dataclasses.replace(
        right,
        explicit_watermarks=(Watermark(system_time=T0, event_time=Timestamp.of(2023, 10, 1)),),
    )
    left_idle = dataclasses.replace(
        left, data_paths=(), offset_interval=None, explicit_watermarks=()
    )
    second = execute_transform(
        _request(
            tmp_path,
            query,
            (left_idle, right_wm),
            "two",
            prev_checkpoint=first.new_checkpoint.path,
            next_offset=3000,
        )
    )
    assert second.new_data is None
    assert second.new_watermark == Timestamp.of(2023, 10, 1)  # the slowest input's
    assert read_checkpoint(second.new_checkpoint.path) == {
        LEFT_ID: Timestamp.of(2023, 11, 5),
        RIGHT_ID: Timestamp.of(2023, 10, 1),
    }
    held = execute_transform(
        _request(
            tmp_path,
            query,
            (left_idle, right),
            "three",
            prev_checkpoint=second.new_checkpoint.path,
            prev_watermark=Timestamp.of(2023, 10, 2),
        )
    )
    assert held.new_watermark == Timestamp.of(2023, 10, 2)  # never moves back
    assert held.new_checkpoint.physical_hash == second.new_checkpoint.physical_hash


@pytest.fixture(scope="module")
def scores_input(spark, tmp_path_factory: pytest.TempPathFactory) -> TransformInputSlice:
    schema, paths, rows = _slices(spark, tmp_path_factory.mktemp("scores"), "in", SCORES, [3000])
    return TransformInputSlice(LEFT_ID, "scores", Vocab(), schema, tuple(paths), (0, rows - 1))


@pytest.mark.parametrize(
    ("transform", "error", "message"),
    [
        (
            TransformSql(engine="flink", query="SELECT 1"),
            UnsupportedTransformError,
            "engine 'flink'",
        ),
        (
            TransformSql(
                engine="spark",
                query="SELECT 1",
                temporal_tables=(TemporalTable(name="scores", primary_key=("player",)),),
            ),
            UnsupportedTransformError,
            "temporal tables",
        ),
        (
            TransformSql(engine="spark", query="SELECT uuid() AS u, event_time FROM scores"),
            NonDeterministicQueryError,
            "not deterministic",
        ),
        (
            TransformSql(
                engine="spark", query="SELECT current_timestamp() AS event_time FROM scores"
            ),
            NonDeterministicQueryError,
            "current_timestamp",
        ),
        (
            TransformSql(engine="spark", query="SELECT player FROM scores"),
            TransformError,
            "no event time column",
        ),
        (
            TransformSql(engine="spark", query="SELECT player AS event_time FROM scores"),
            TransformError,
            "must be a TIMESTAMP or DATE",
        ),
        (
            TransformSql(engine="spark", query="SELECT offset, event_time FROM scores"),
            TransformError,
            "clashes with a system column",
        ),
        (
            TransformSql(engine="spark", query="SELECT 'x' AS op, event_time FROM scores"),
            TransformError,
            "must be INT",
        ),
        (
            TransformSql(engine="spark", query="SELECT nope FROM scores"),
            InvalidQueryError,
            "query step 1 is invalid",
        ),
        (
            TransformSql(
                engine="spark", query="SELECT event_time, CAST(player AS INT) AS n FROM scores"
            ),
            QueryExecutionError,
            r"out: the transform failed: \[CAST_INVALID_INPUT\] The value 'p0'",
        ),
    ],
)
def test_transforms_odfd_cannot_run_fail_clearly(
    scores_input, tmp_path: Path, transform, error, message
) -> None:
    request = dataclasses.replace(
        _request(tmp_path, "", (scores_input,), "out"), transform=transform
    )
    with pytest.raises(error, match=message):
        execute_transform(request)
