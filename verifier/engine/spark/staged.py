"""A Spark Connect result written by the server into the workspace and read back from disk.

Through Spark Connect every record of a result otherwise crosses the server's one gRPC stream
as Arrow batches. When the server's executors see the same filesystem as odfd
(``[spark] shared_filesystem``, for a cluster with a shared mount), they write the result as
Parquet (a standard DataFrame write, in parallel) into a staging folder under the transaction's
work folder, and the client reads the files memory-mapped. On one machine the stream is faster
(Spark writes Parquet more slowly than it makes Arrow batches, and reading can only start after
the last file is written), hence off by default.

Spark writes one ``part-NNNNN`` file per non-empty partition, numbered by partition, so reading
them in that order gives the rows in partition order, then row order — the order a collection
gives. Each file is cut into batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, as
Spark cuts each partition when it collects, and cast to the Arrow schema a collection has (Spark
writes every Parquet column as optional); so the slice written from them is the one a classic
session writes. Types Parquet cannot carry unchanged (intervals, ``void``, variants, user types)
and column names that only differ in case are left to the streaming path.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from verifier.engine.spark import internals
from verifier.engine.spark.settings import DETERMINISM
from verifier.errors import VerifierError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

#: Name prefix of staging folders (inside a transaction's work folder, removed on exit).
STAGING_PREFIX = ".spark-result-"

#: Rows per batch, as a collection cuts each partition.
BATCH_ROWS = int(DETERMINISM["spark.sql.execution.arrow.maxRecordsPerBatch"])

#: Session settings for the staging write: timestamps as Parquet's INT64 microseconds in UTC
#: (Spark's default INT96 reads back as nanoseconds, which overflow outside 1677-2262).
WRITE_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}


class StagingError(VerifierError):
    """The server's staged result is not where it said it wrote it."""


_PART = re.compile(r"part-(\d+)-.*?(?:-c(\d+))?\.[^/]*parquet")


def can_stage(schema: StructType) -> bool:
    """Whether every column of ``schema`` survives a Parquet round trip unchanged."""
    names = [f.name.lower() for f in schema.fields]
    return len(set(names)) == len(names) and all(_parquet_safe(f.dataType) for f in schema.fields)


def _parquet_safe(data_type: DataType) -> bool:
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return bool(data_type.fields) and all(_parquet_safe(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _parquet_safe(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _parquet_safe(data_type.keyType) and _parquet_safe(data_type.valueType)
    return isinstance(
        data_type,
        (
            T.BooleanType,
            T.ByteType,
            T.ShortType,
            T.IntegerType,
            T.LongType,
            T.FloatType,
            T.DoubleType,
            T.DecimalType,
            T.StringType,
            T.BinaryType,
            T.DateType,
            T.TimestampType,
            T.TimestampNTZType,
        ),
    )


@contextmanager
def staged_batches(
    df: DataFrame, schema: pa.Schema, parent: Path
) -> Iterator[Iterator[pa.RecordBatch]]:
    """Has the server write ``df`` under ``parent``; yields its rows as batches of ``schema``.

    The staging folder is removed on exit, whether the write, the reading or the caller failed.
    """
    # Absolute: the server resolves a relative path against its own working folder.
    folder = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent.absolute()))
    try:
        internals.set_confs(df.sparkSession, WRITE_CONF)
        out = folder / "result"
        df.write.option("compression", "snappy").option("maxRecordsPerFile", "0").parquet(str(out))
        yield _read_parts(_part_files(out), schema)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _part_files(folder: Path) -> list[Path]:
    """The written files in partition order (and file order within a partition)."""
    if not (folder / "_SUCCESS").is_file():
        raise StagingError(
            f"the Spark Connect server reported the result written to {folder}, but it is not "
            "there: the server does not share this filesystem (set [spark] shared_filesystem = false)"
        )
    parts = []
    for path in folder.iterdir():
        match = _PART.fullmatch(path.name)
        if match:
            parts.append((int(match.group(1)), int(match.group(2) or 0), path))
    return [path for _, _, path in sorted(parts)]


def _read_parts(paths: list[Path], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for path in paths:
        with pq.ParquetFile(path, memory_map=True) as parquet:
            pending: list[pa.RecordBatch] = []
            pending_rows = 0
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, use_threads=True):
                pending.append(batch)
                pending_rows += batch.num_rows
                while pending_rows >= BATCH_ROWS:
                    head, pending = _split(pending, BATCH_ROWS)
                    pending_rows -= BATCH_ROWS
                    yield _cast(head, schema)
            if pending_rows:
                yield _cast(_concat(pending), schema)


def _split(batches: list[pa.RecordBatch], rows: int) -> tuple[pa.RecordBatch, list[pa.RecordBatch]]:
    """The first ``rows`` rows of ``batches`` as one batch, and the rest."""
    head = _concat(batches)
    if head.num_rows == rows:
        return head, []
    return head.slice(0, rows), [head.slice(rows)]


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    columns = [
        column if column.type.equals(field.type) else column.cast(field.type)
        for column, field in zip(batch.columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
