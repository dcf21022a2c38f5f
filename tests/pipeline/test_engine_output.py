"""Collecting results in order with bounded memory, and writing them as one hashed slice."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.hashing import logical_hash, physical_hash_file
from protocol.model import Timestamp
from verifier.engine.columns import Vocab
from verifier.engine.output import OutputSchemaError
from verifier.engine.spark.collect import ordered_batches
from verifier.engine.spark.output import write_slice

pytestmark = pytest.mark.spark

SYSTEM_TIME = Timestamp.of(2024, 2, 3, 4, 5, 6, 789_123_456)


def test_batches_come_in_partition_order_even_when_spilled(spark) -> None:
    df = spark.range(0, 50_000, numPartitions=7).selectExpr("id", "cast(id AS string) AS s")
    with ordered_batches(df, memory_budget=64 * 1024) as (schema, batches):
        table = pa.Table.from_batches(list(batches), schema)
    assert table.column("id").to_pylist() == list(range(50_000))
    with ordered_batches(df.where("id < 0")) as (schema, batches):
        assert list(batches) == [] and schema.names == ["id", "s"]


def test_slice_layout_offsets_system_time_and_hashes(spark, tmp_path: Path) -> None:
    df = spark.sql(
        "SELECT 0 AS op, timestamp_micros(id * 1000001) AS event_time, id AS v, "
        "CAST(NULL AS STRING) AS note FROM range(0, 1000, 1, 3)"
    )
    schema, written = write_slice(
        df, vocab=Vocab(), start_offset=17, system_time=SYSTEM_TIME, out_path=tmp_path / "s.parquet"
    )
    assert written is not None
    table = pq.read_table(written.path)
    assert table.schema == schema
    assert schema.names == ["offset", "op", "system_time", "event_time", "v", "note"]
    assert schema.field("offset").type == pa.int64() and not schema.field("offset").nullable
    assert schema.field("op").type == pa.int32()
    assert schema.field("event_time").type == pa.timestamp("ms", tz="UTC")
    assert table.column("offset").to_pylist() == list(range(17, 1017))
    assert set(table.column("system_time").cast(pa.int64()).to_pylist()) == {
        SYSTEM_TIME.epoch_millis
    }
    # microseconds are truncated to milliseconds, as the reference stores event times
    assert table.column("event_time").cast(pa.int64()).to_pylist()[:3] == [0, 1000, 2000]
    assert (written.offset_start, written.offset_end, written.num_records) == (17, 1016, 1000)
    assert written.logical_hash == logical_hash(table)
    assert written.physical_hash == physical_hash_file(written.path)
    assert written.size == written.path.stat().st_size
    assert written.max_event_time == Timestamp.from_epoch_millis(999 * 1000001 // 1000)


def test_empty_result_writes_no_file_but_has_a_schema(spark, tmp_path: Path) -> None:
    df = spark.sql("SELECT CAST(1 AS INT) AS op, current_date() AS event_time WHERE false")
    schema, written = write_slice(
        df, vocab=Vocab(), start_offset=0, system_time=SYSTEM_TIME, out_path=tmp_path / "e.parquet"
    )
    assert written is None and not (tmp_path / "e.parquet").exists()
    assert schema.names == ["offset", "op", "system_time", "event_time"]
    assert schema.field("event_time").type == pa.date32()


def test_system_column_clash_is_rejected(spark, tmp_path: Path) -> None:
    df = spark.sql("SELECT 0 AS op, 1 AS offset")
    with pytest.raises(OutputSchemaError, match="'offset' that clashes"):
        write_slice(
            df,
            vocab=Vocab(),
            start_offset=0,
            system_time=SYSTEM_TIME,
            out_path=tmp_path / "x.parquet",
        )


@pytest.mark.parametrize(
    "event_time",
    [
        "timestamp_micros((id * 7919 % 1000) * 1000000)",  # partitions overlap: runs merged
        "timestamp_micros(id * 1000)",  # partitions continue one another: one run, streamed
    ],
)
def test_partitions_sorted_alone_and_merged_equal_a_global_sort(
    spark, tmp_path: Path, event_time: str
) -> None:
    df = spark.sql(
        f"SELECT 0 AS op, {event_time} AS event_time, id AS v, "
        "monotonically_increasing_id() AS __order FROM range(0, 30000, 1, 4)"
    )
    written = {}
    for name, ordered, merge_keys in [
        ("global", df.orderBy("event_time", "__order").drop("__order"), None),
        (
            "merged",
            df.sortWithinPartitions("event_time", "__order"),
            ("event_time", "__order"),
        ),
    ]:
        schema, written[name] = write_slice(
            ordered,
            vocab=Vocab(),
            start_offset=0,
            system_time=SYSTEM_TIME,
            out_path=tmp_path / f"{name}.parquet",
            merge_keys=merge_keys,
        )
        assert "__order" not in schema.names
    merged, global_ = written["merged"], written["global"]
    assert merged is not None and global_ is not None
    assert pq.read_table(merged.path) == pq.read_table(global_.path)
    assert merged.logical_hash == global_.logical_hash
    assert merged.num_records == 30000
