"""Streams a DataFrame's result to the driver as Arrow batches, in partition order, in bounded memory.

Why not ``DataFrame.toArrow()``: it holds the whole result in driver memory, and slices of a big
ingest can be larger than that. Spark's Arrow collection sends batches as partitions finish (out
of order) and only at the end says which order they belong in; so batches are kept in memory up to
a budget and spilled past it to an Arrow IPC file on the driver's local disk, then read back (memory
mapped) in the right order. Collecting to the driver, rather than letting executors write the slice,
also works on cluster masters whose executors cannot see the driver's disk, and it hands the exact
record batches to the logical hash.

This relies on PySpark's own Arrow collection entry points (``collectAsArrowToPython`` and its
socket serializer) — the same calls ``toArrow()`` makes — through
:mod:`verifier.engine.spark.internals`, and is pinned by the ``pyspark`` version range in
``pyproject.toml``.

Through Spark Connect there is no JVM in the process. When the server shares the workspace's
filesystem and the caller names a work folder, the server writes the result there and it is read
back from disk (``verifier.engine.spark.staged``). Otherwise the server streams the result as Arrow
batches already in partition order (it holds back early partitions itself), so they are passed
on as they arrive, which bounds memory the same way (``internals.connect_arrow_stream``, the
streaming half of ``toArrow()``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from verifier.engine.spark import internals
from verifier.engine.spark.run_merge import SortedRuns
from verifier.engine.spark.session import shares_filesystem
from verifier.engine.spark.staged import can_stage, staged_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: How many bytes of out-of-order batches are kept in memory before spilling to disk.
DEFAULT_MEMORY_BUDGET = 256 * 1024 * 1024


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema Spark uses when it sends ``df``'s rows to Python."""
    return internals.to_arrow_schema(df.schema)


@contextmanager
def ordered_batches(
    df: DataFrame, spill_dir: str | None = None, memory_budget: int = DEFAULT_MEMORY_BUDGET
) -> Iterator[tuple[pa.Schema, Iterator[pa.RecordBatch]]]:
    """Yields ``(schema, batches)``: every row of ``df`` in partition order, then row order.

    The iterator must be consumed inside the ``with`` block; spill files (and a Connect server's
    staged result, written under ``spill_dir``) are removed on exit.
    """
    if internals.is_connect(df):
        spark_schema = df.schema if spill_dir is not None and shares_filesystem() else None
        if spill_dir is not None and spark_schema is not None and can_stage(spark_schema):
            schema = internals.to_arrow_schema(spark_schema)
            with staged_batches(df, schema, Path(spill_dir)) as batches:
                yield schema, batches
            return
        with _connect_batches(df) as result:
            yield result
        return
    schema = arrow_schema_of(df)
    with _spool(spill_dir, memory_budget) as spool:
        order: list[int] = []
        with internals.arrow_collection(df) as items:
            for item in items:
                if isinstance(item, pa.RecordBatch):
                    spool.add(item)
                else:
                    order = list(item)
        if len(order) != spool.count:
            raise RuntimeError(
                f"Spark sent {spool.count} Arrow batches but an order for {len(order)}"
            )
        if spool.count and spool.schema is not None:
            schema = spool.schema
        yield schema, spool.read_in(order)


@contextmanager
def merged_batches(
    df: DataFrame,
    first: str,
    second: str,
    spill_dir: str | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> Iterator[tuple[pa.Schema, SortedRuns]]:
    """:func:`ordered_batches` of a ``df`` Spark sorted within partitions by the integer columns
    ``first`` and ``second``, as :class:`~verifier.engine.spark.run_merge.SortedRuns` that give every
    row in the order a global sort by both gives, without ``second``."""
    with (
        ordered_batches(df, spill_dir, memory_budget) as (schema, batches),
        _spool(spill_dir, memory_budget) as spool,
    ):
        yield (
            schema.remove(schema.get_field_index(second)),
            SortedRuns(first, second, batches, spool),
        )


@contextmanager
def _connect_batches(df: DataFrame) -> Iterator[tuple[pa.Schema, Iterator[pa.RecordBatch]]]:
    with internals.connect_arrow_stream(df) as stream:
        batches = (
            batch
            for item in stream
            if isinstance(item, pa.Table)
            for batch in item.to_batches()
            if batch.num_rows
        )
        try:
            first = next(batches, None)
            if first is None:
                yield arrow_schema_of(df), iter(())
            else:
                yield first.schema, _chain(first, batches)
        finally:
            batches.close()


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


class _Spool:
    """Holds batches by arrival index; past a memory budget, appends them to an IPC file."""

    def __init__(self, spill_dir: str | None, memory_budget: int) -> None:
        self._spill_dir = spill_dir
        self._budget = memory_budget
        self._in_memory: dict[int, pa.RecordBatch] = {}
        self._in_memory_bytes = 0
        self._file_index: dict[int, int] = {}
        self._path: str | None = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._reader_source: pa.MemoryMappedFile | None = None
        self._reader: pa.ipc.RecordBatchFileReader | None = None
        self.count = 0
        self.schema: pa.Schema | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        if self.schema is None:
            self.schema = batch.schema
        index = self.count
        self.count += 1
        if self._writer is None and self._in_memory_bytes + batch.nbytes <= self._budget:
            self._in_memory[index] = batch
            self._in_memory_bytes += batch.nbytes
            return
        if self._writer is None:
            fd, self._path = tempfile.mkstemp(
                prefix="odfd-collect-", suffix=".arrow", dir=self._spill_dir
            )
            os.close(fd)
            self._sink = pa.OSFile(self._path, "wb")
            self._writer = pa.ipc.new_file(self._sink, batch.schema)
        self._file_index[index] = len(self._file_index)
        self._writer.write_batch(batch)

    def read_in(self, order: list[int]) -> Iterator[pa.RecordBatch]:
        for index in order:
            yield self.get(index)

    def get(self, index: int) -> pa.RecordBatch:
        """The batch that arrived as ``index``; once (an in-memory batch is let go)."""
        batch = self._in_memory.pop(index, None)
        if batch is not None:
            return batch
        if self._reader is None:
            self._reader = self._finish_spill_file()
        return self._reader.get_batch(self._file_index[index])

    def _finish_spill_file(self) -> pa.ipc.RecordBatchFileReader:
        assert self._writer is not None and self._sink is not None and self._path is not None
        self._writer.close()
        self._writer = None
        self._sink.close()
        self._reader_source = pa.memory_map(self._path, "r")
        return pa.ipc.open_file(self._reader_source)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._sink is not None:
            self._sink.close()
        if self._reader_source is not None:
            self._reader_source.close()
        if self._path is not None and os.path.exists(self._path):
            os.remove(self._path)
        self._in_memory.clear()


@contextmanager
def _spool(spill_dir: str | None, memory_budget: int) -> Iterator[_Spool]:
    spool = _Spool(spill_dir, memory_budget)
    try:
        yield spool
    finally:
        spool.close()
