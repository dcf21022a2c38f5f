"""Orders a result by two integer keys in the driver, from partitions Spark sorted one by one.

Why: an ingest orders its records by event time, then input position. Sorted by Spark that is a
global sort: a sampling pass over the input, a shuffle of every record and the sort, about twice
the cost of the rest of the ingest. Instead Spark sorts each partition on its own (no shuffle)
and the driver merges them here: partitions arrive in partition order, each a sorted run, and
consecutive partitions often continue one another (data appended in time order). Such a result
is one run: :meth:`SortedRuns.streamed` passes its batches on as they arrive, so the slice is
written and hashed while Spark still reads. At the first row that goes before its predecessor it
raises :class:`RunsOverlap` (the caller starts again) and :meth:`SortedRuns.merged` merges the
runs by windows of a bounded number of rows, from the spool every batch was kept in
(``verifier.engine.spark.collect``).

The keys are integers without nulls (a timestamp's or date's value, a row position), compared as
Spark's ascending sort compares them; together they are unique, so the order is total and the
result is the one a global sort gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Protocol

import numpy as np
import pyarrow as pa

#: Rows of the runs' windows held at once while merging (spread over the runs).
MERGE_WINDOW_ROWS = 1 << 20
#: The fewest rows a run's window holds, however many runs there are.
MIN_WINDOW_ROWS = 1024
#: Rows per merged batch: the batch size of a Spark Arrow collection (``maxRecordsPerBatch``).
OUTPUT_BATCH_ROWS = 65536


class BatchStore(Protocol):
    """Where the batches wait until all have arrived (``verifier.engine.spark.collect``'s spool)."""

    def add(self, batch: pa.RecordBatch) -> None:
        """Keeps ``batch`` as the next index (0, 1, ...)."""

    def get(self, index: int) -> pa.RecordBatch:
        """The batch kept as ``index``; each is asked for once."""


class RunsOverlap(Exception):
    """The result is more than one sorted run: what :meth:`SortedRuns.streamed` gave so far is
    to be dropped, and :meth:`SortedRuns.merged` gives the result in order."""


class RunMergeError(ValueError):
    """A key column holds nulls or a type that is not an integer, timestamp or date."""


def key_values(array: pa.Array, column: str) -> np.ndarray:
    """``array``'s values as int64, in the order Spark sorts them."""
    if array.null_count:
        raise RunMergeError(f"sort key column {column!r} holds nulls")
    data_type = array.type
    if pa.types.is_timestamp(data_type) or pa.types.is_date64(data_type):
        array = array.view(pa.int64())
    elif pa.types.is_date32(data_type):
        array = array.view(pa.int32())
    elif not pa.types.is_integer(data_type):
        raise RunMergeError(f"sort key column {column!r} has type {data_type}, not an integer")
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64)


@dataclass
class _Run:
    """One sorted run: batches ``start`` to ``end`` of the spool, read one window at a time."""

    start: int
    end: int
    window: pa.RecordBatch | None = None
    first: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    second: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    rest: pa.RecordBatch | None = None


class SortedRuns:
    """A result's ``batches`` (each sorted by ``(first, second)``) in key order, without the
    ``second`` key column: streamed while they form one run, else merged."""

    def __init__(
        self, first: str, second: str, batches: Iterable[pa.RecordBatch], store: BatchStore
    ) -> None:
        self.first, self.second = first, second
        self._source = iter(batches)
        self._store = store
        self._count = 0
        self._run_starts: list[int] = []
        self._last: tuple[int, int] | None = None

    def streamed(self) -> Iterator[pa.RecordBatch]:
        """The batches as they arrive (each kept as well) while they form one run; raises
        :class:`RunsOverlap`, once every batch is kept, where a second run begins."""

        def one_run() -> Iterator[pa.RecordBatch]:
            for batch in self._source:
                if batch.num_rows == 0:
                    continue
                self._add(batch)
                if len(self._run_starts) > 1:
                    self._add_rest()
                    raise RunsOverlap(f"the result is {len(self._run_starts)} or more sorted runs")
                yield self._without_second(batch)

        return _rebatched(one_run())

    def _add_rest(self) -> None:
        for batch in self._source:
            if batch.num_rows:
                self._add(batch)

    def _add(self, batch: pa.RecordBatch) -> None:
        first = key_values(batch.column(self.first), self.first)
        second = key_values(batch.column(self.second), self.second)
        # Rows that go before their predecessor start a new run (within a batch as well: a
        # batch could hold the end of one partition and the start of the next).
        descents = np.flatnonzero(
            (first[1:] < first[:-1]) | ((first[1:] == first[:-1]) & (second[1:] < second[:-1]))
        )
        cuts = [0, *(descents + 1).tolist(), batch.num_rows]
        for begin, end in pairwise(cuts):
            head = (int(first[begin]), int(second[begin]))
            if self._last is None or head < self._last:
                self._run_starts.append(self._count)
            self._store.add(batch.slice(begin, end - begin))
            self._count += 1
            self._last = (int(first[end - 1]), int(second[end - 1]))

    @property
    def runs(self) -> int:
        return len(self._run_starts)

    def merged(self) -> Iterator[pa.RecordBatch]:
        """Every row, in key order, in batches of :data:`OUTPUT_BATCH_ROWS` (after keeping the
        batches :meth:`streamed` did not reach)."""
        self._add_rest()
        bounds = [*self._run_starts, self._count]
        runs = [_Run(start, end) for start, end in pairwise(bounds)]
        if len(runs) <= 1:
            batches = (self._store.get(i) for i in range(self._count))
            yield from _rebatched(self._without_second(b) for b in batches)
            return
        yield from _rebatched(self._merge(runs))

    def _merge(self, runs: list[_Run]) -> Iterator[pa.RecordBatch]:
        window_rows = max(MERGE_WINDOW_ROWS // len(runs), MIN_WINDOW_ROWS)
        live = [run for run in runs if self._fill(run, window_rows)]
        while live:
            # Every row at or below the smallest window end is in some window: emit those.
            bound = min((int(r.first[-1]), int(r.second[-1])) for r in live)
            pieces, firsts, seconds = [], [], []
            for run in live:
                count = _count_up_to(run.first, run.second, bound)
                if count:
                    assert run.window is not None  # a live run holds a window
                    pieces.append(run.window.slice(0, count))
                    firsts.append(run.first[:count])
                    seconds.append(run.second[:count])
                    run.window = run.window.slice(count)
                    run.first, run.second = run.first[count:], run.second[count:]
            order = np.lexsort((np.concatenate(seconds), np.concatenate(firsts)))
            yield self._without_second(_one(pieces).take(pa.array(order)))
            live = [run for run in live if len(run.first) or self._fill(run, window_rows)]

    def _fill(self, run: _Run, rows: int) -> bool:
        """Loads the run's next window of up to ``rows`` rows; ``False`` when it is exhausted."""
        if run.rest is None or run.rest.num_rows == 0:
            if run.start == run.end:
                return False
            run.rest = self._store.get(run.start)
            run.start += 1
        run.window, run.rest = run.rest.slice(0, rows), run.rest.slice(rows)
        run.first = key_values(run.window.column(self.first), self.first)
        run.second = key_values(run.window.column(self.second), self.second)
        return True

    def _without_second(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.drop_columns([self.second])


def _count_up_to(first: np.ndarray, second: np.ndarray, bound: tuple[int, int]) -> int:
    """How many leading rows of a sorted window have a key ``<= bound``."""
    below = int(np.searchsorted(first, bound[0], side="left"))
    tied = int(np.searchsorted(first, bound[0], side="right"))
    return below + int(np.searchsorted(second[below:tied], bound[1], side="right"))


def _rebatched(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` cut into batches of :data:`OUTPUT_BATCH_ROWS` rows (the last one shorter)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        while batch.num_rows:
            take = min(OUTPUT_BATCH_ROWS - rows, batch.num_rows)
            pending.append(batch.slice(0, take))
            rows += take
            batch = batch.slice(take)
            if rows == OUTPUT_BATCH_ROWS:
                yield _one(pending)
                pending, rows = [], 0
    if rows:
        yield _one(pending)


def _one(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)
