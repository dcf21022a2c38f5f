"""Hashing Parquet files: how a file is opened and cut into batches for its logical hash, and both
of a file's hashes from one read of its bytes.

- String and binary columns whose pages are all dictionary-encoded (most columns of repeated
  values: writers fall back to plain pages only when the dictionary outgrows its page) are read
  as dictionaries: their values are not decoded, and their records are taken whole from the
  encoded dictionary. Decoding such a column costs more than hashing it would save, so a column
  with plain pages is read plainly.
- Batches are the reference's (:data:`PARQUET_BATCH_ROWS`, re-cut exactly) where the hash depends
  on them (struct columns, see ``records_digest``), else :data:`FLAT_BATCH_ROWS`: large enough
  that the per-batch work of decoding and hashing (and the hand-offs between threads) is small,
  small enough that the batches in flight and their records fit in memory the allocator reuses:
  memory first touched costs a page fault and the zeroing of its pages, which at twice this size
  cost ~5% of the CPU of ``odfd data hash`` and of a verification (and 20-70 MB more peak memory).
- :func:`hash_parquet_file` reads a file once into memory (up to :data:`IN_MEMORY_BYTES`) and
  hashes its bytes on the executor while the main thread decodes its records, whose columns are
  hashed on the executor too; a larger file is read twice, both passes at once, in bounded memory.
  A caller may start the read and the physical hash itself (``physical.read_whole``) before this
  module and Arrow are imported, so that they overlap the imports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.types as pat

from protocol.hashing.errors import DataFileError, UnsupportedDataTypeError
from protocol.hashing.physical import IN_MEMORY_BYTES, WholeFile, read_whole
from protocol.hashing.records_digest import PARQUET_BATCH_ROWS, RecordsDigest, exact_batches
from protocol.identity import Multihash

FLAT_BATCH_ROWS = 1 << 16
"""Rows per batch for schemas whose logical hash does not depend on batch boundaries."""

STREAM_BUFFER_BYTES = 1 << 20
"""Read buffer per column chunk of a file streamed from disk: pages decode as they arrive."""

_INDEX_BYTES_PER_VALUE = 4
"""A dictionary-encoded page holds bit-packed indices (at most ~2.5 bytes a value for a million
distinct values); a plain page of strings at least a 4-byte length per value."""

Source: TypeAlias = "str | pa.NativeFile"


def open_parquet(source: Source, buffer_size: int = 0) -> pq.ParquetFile:
    """``source`` opened for hashing (see the module docstring); raises ``OSError`` or
    ``pa.ArrowException`` when it is not a readable Parquet file. ``buffer_size`` > 0 streams
    each column chunk through a read buffer of that size (bounded memory for a file on disk)."""
    plain = pq.ParquetFile(source, buffer_size=buffer_size, pre_buffer=False)
    columns = dictionary_columns(plain)
    if not columns:
        return plain
    return pq.ParquetFile(
        source,
        metadata=plain.metadata,
        buffer_size=buffer_size,
        pre_buffer=False,
        read_dictionary=columns,
    )


def dictionary_columns(parquet: pq.ParquetFile) -> list[str]:
    """Top-level string and binary columns whose every column chunk is all dictionary pages, in
    a schema without structs (whose batches are re-cut, which dictionaries would complicate)."""
    schema = parquet.schema_arrow
    if any(pat.is_struct(field.type) for field in schema):
        return []
    metadata = parquet.metadata
    candidates = {
        field.name
        for field in schema
        if pat.is_string(field.type)
        or pat.is_large_string(field.type)
        or pat.is_binary(field.type)
        or pat.is_large_binary(field.type)
    }
    columns = []
    for index in range(metadata.num_columns):
        path = metadata.schema.column(index).path
        if path in candidates and _all_dictionary_pages(metadata, index):
            columns.append(path)
    return columns


def _all_dictionary_pages(metadata: pq.FileMetaData, column: int) -> bool:
    if metadata.num_row_groups == 0:
        return False
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(column)
        if not chunk.has_dictionary_page or chunk.dictionary_page_offset is None:
            return False
        dictionary_bytes = chunk.data_page_offset - chunk.dictionary_page_offset
        data_bytes = chunk.total_compressed_size - dictionary_bytes
        if dictionary_bytes <= 0 or data_bytes > _INDEX_BYTES_PER_VALUE * chunk.num_values:
            return False
    return True


def hashing_batches(parquet: pq.ParquetFile) -> Iterator[pa.RecordBatch]:
    """The batches to hash ``parquet`` in (see the module docstring)."""
    if any(pat.is_struct(field.type) for field in parquet.schema_arrow):
        batches = parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, use_threads=False)
        return exact_batches(batches)
    flat: Iterator[pa.RecordBatch] = parquet.iter_batches(
        batch_size=FLAT_BATCH_ROWS, use_threads=False
    )
    return flat


def logical_hash_parquet(
    path: str | os.PathLike[str], executor: Executor | None = None
) -> Multihash:
    """The logical hash of a Parquet file, streamed a batch at a time (bounded memory); its
    columns are hashed on ``executor``'s threads when one is given.

    Batches are cut every :data:`PARQUET_BATCH_ROWS` rows across row groups where the hash
    depends on them, as the reference reads the file, so that even batch-dependent data (see
    ``records_digest``) hashes alike.
    """
    return _logical_hash(os.fspath(path), os.fspath(path), executor)


def _logical_hash(source: Source, where: str, executor: Executor | None) -> Multihash:
    try:
        file = open_parquet(source, STREAM_BUFFER_BYTES if isinstance(source, str) else 0)
    except FileNotFoundError as error:
        raise DataFileError(f"cannot read {where}: no such file") from error
    except OSError as error:
        raise DataFileError(f"cannot read {where}: {error}") from error
    except pa.ArrowInvalid as error:
        raise DataFileError(f"{where} is not a Parquet file: {error}") from error
    with file:
        try:
            digest = RecordsDigest(file.schema_arrow, executor)
        except UnsupportedDataTypeError as error:
            raise UnsupportedDataTypeError(
                error.column, error.data_type, f"{error.reason} (in {where})"
            ) from error
        try:
            for batch in hashing_batches(file):
                digest.update(batch)
            return digest.finalize()
        except (pa.ArrowInvalid, OSError) as error:
            raise DataFileError(f"cannot read {where}: {error}") from error


@dataclass(frozen=True, slots=True)
class FileHashes:
    """What a ``DataSlice`` records of a file's content and bytes."""

    logical: Multihash
    physical: Multihash


def hash_parquet_file(
    path: str | os.PathLike[str], executor: Executor, reading: WholeFile | None = None
) -> FileHashes:
    """Both hashes of a Parquet file, its bytes and its records hashed side by side; ``reading``
    is the file's read already started by ``physical.read_whole`` (else it starts here)."""
    where = os.fspath(path)
    if reading is None:
        reading = read_whole(where, executor, IN_MEMORY_BYTES)
    data = reading.data.result()
    source: Source = where if data is None else pa.BufferReader(data)
    logical = _logical_hash(source, where, executor)
    return FileHashes(logical, reading.physical.result())
