"""Merging partitions Spark sorted one by one gives exactly the rows of a global sort."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.engine.spark import run_merge
from verifier.engine.spark.run_merge import RunMergeError, RunsOverlap, SortedRuns


class ListStore:
    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch | None] = []

    def add(self, batch: pa.RecordBatch) -> None:
        self.batches.append(batch)

    def get(self, index: int) -> pa.RecordBatch:
        batch = self.batches[index]
        assert batch is not None, f"batch {index} asked for twice"
        self.batches[index] = None
        return batch


def partitions_as_batches(
    times: list[int], partitions: int, batch_rows: int, time_type: pa.DataType
) -> Iterator[pa.RecordBatch]:
    """Rows cut into ``partitions`` in input order, each sorted by (time, position) as
    ``sortWithinPartitions`` leaves it, sent as batches of ``batch_rows``."""
    position = np.arange(len(times), dtype=np.int64)
    for part in np.array_split(np.arange(len(times)), partitions):
        t = np.asarray(times, dtype=np.int64)[part]
        order = np.lexsort((position[part], t))
        table = pa.table(
            {
                "event_time": pa.array(t[order])
                .cast(pa.int32() if time_type == pa.date32() else pa.int64())
                .view(time_type),
                "value": pa.array([f"row {i}" for i in position[part][order]]),
                "__order": pa.array(position[part][order]),
            }
        )
        yield from table.to_batches(max_chunksize=batch_rows)


def merged(batches: Iterator[pa.RecordBatch]) -> tuple[pa.Table, int]:
    runs = SortedRuns("event_time", "__order", batches, ListStore())
    out = list(runs.merged())
    assert all(b.num_rows == run_merge.OUTPUT_BATCH_ROWS for b in out[:-1])
    return pa.Table.from_batches(out) if out else pa.table({}), runs.runs


def expected(times: list[int]) -> list[str]:
    return [f"row {i}" for i in sorted(range(len(times)), key=lambda i: (times[i], i))]


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(st.integers(-5, 40), min_size=1, max_size=400),
    partitions=st.integers(1, 9),
    batch_rows=st.integers(1, 50),
    window=st.integers(1, 64),
)
def test_any_partitioning_merges_to_the_global_sort(
    times: list[int], partitions: int, batch_rows: int, window: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_merge, "MERGE_WINDOW_ROWS", window)
        patch.setattr(run_merge, "MIN_WINDOW_ROWS", 1)
        patch.setattr(run_merge, "OUTPUT_BATCH_ROWS", 32)
        table, _ = merged(
            partitions_as_batches(times, partitions, batch_rows, pa.timestamp("us", "UTC"))
        )
    assert table.column_names == ["event_time", "value"]
    assert table["value"].to_pylist() == expected(times)
    assert table["event_time"].type == pa.timestamp("us", "UTC")


def test_partitions_that_continue_one_another_are_one_run_passed_through() -> None:
    times = list(range(10_000))
    table, runs = merged(partitions_as_batches(times, 7, 999, pa.date32()))
    assert runs == 1
    assert table["value"].to_pylist() == expected(times)


def test_equal_times_are_ordered_by_input_position_across_runs() -> None:
    times = [3] * 5000 + [1] * 5000  # the second half's rows go first
    table, runs = merged(partitions_as_batches(times, 4, 700, pa.timestamp("ms", "UTC")))
    assert runs == 2
    assert table["value"].to_pylist() == expected(times)


def test_a_null_or_non_integer_key_is_refused() -> None:
    batch = pa.record_batch({"event_time": pa.array([1, None]), "__order": pa.array([0, 1])})
    with pytest.raises(RunMergeError, match="'event_time' holds nulls"):
        list(SortedRuns("event_time", "__order", [batch], ListStore()).merged())
    batch = pa.record_batch({"event_time": pa.array(["a"]), "__order": pa.array([0])})
    with pytest.raises(RunMergeError, match="not an integer"):
        list(SortedRuns("event_time", "__order", [batch], ListStore()).streamed())


def test_one_run_streams_as_it_arrives_and_more_runs_start_again_merged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_merge, "OUTPUT_BATCH_ROWS", 100)
    source = partitions_as_batches(list(range(5000)), 5, 300, pa.timestamp("us", "UTC"))
    arrived = 0

    def counted() -> Iterator[pa.RecordBatch]:
        nonlocal arrived
        for batch in source:
            arrived += batch.num_rows
            yield batch

    streamed = SortedRuns("event_time", "__order", counted(), ListStore()).streamed()
    first = next(streamed)
    assert first.num_rows == 100 and arrived == 300  # passed on before the rest arrived
    rest = pa.Table.from_batches([first, *streamed])
    assert rest["value"].to_pylist() == expected(list(range(5000)))
    times = [5, 4, 3, 2, 1, 0] * 900
    runs = SortedRuns(
        "event_time",
        "__order",
        partitions_as_batches(times, 3, 500, pa.timestamp("us", "UTC")),
        ListStore(),
    )
    with pytest.raises(RunsOverlap):
        list(runs.streamed())
    table = pa.Table.from_batches(list(runs.merged()))
    assert runs.runs == 3 and table["value"].to_pylist() == expected(times)
