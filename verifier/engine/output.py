"""Turns a query result into one data slice: system columns, offsets, one Parquet file, its hashes.

Every engine's output takes this path. The result's batches hold ``op`` and the data columns,
already in their final order, and arrive in the order the engine produced the rows. Here each
Arrow batch gets the ``offset`` column (consecutive from the transaction's
first offset, in the order the rows arrive) and the ``system_time`` column (the block's system
time), timestamps are normalised to milliseconds in UTC as the reference writes them, and the
batch goes both into the Parquet writer and into the logical hash. The file is then hashed as a
whole for its physical hash. Column order of a slice: ``offset, op, system_time``, then the rest.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from protocol.hashing import FileDigest, PhysicalHasher
from protocol.identity import Multihash
from protocol.model import DataSlice, OffsetInterval, Timestamp
from verifier.engine.columns import Vocab
from verifier.errors import VerifierError

TIMESTAMP_MS_UTC = pa.timestamp("ms", tz="UTC")
OP_TYPE = pa.int32()
OFFSET_TYPE = pa.int64()

#: Rows per Parquet row group; batches are grouped up to this size before they are written.
ROW_GROUP_ROWS = 1 << 20


class OutputSchemaError(VerifierError):
    """A result cannot be stored as a slice (bad event-time type, clashing column names...)."""


class NullValuesError(OutputSchemaError):
    """A column the slice's schema makes required holds nulls (worded as the reference does)."""

    def __init__(self, column: str, count: int) -> None:
        super().__init__(f"Column `{column}` contains {count} null values while none were expected")
        self.column = column
        self.count = count


@dataclass(frozen=True, slots=True)
class WrittenSlice:
    """A finished slice file and what the metadata block says about it."""

    path: Path
    num_records: int
    size: int
    offset_start: int
    offset_end: int
    logical_hash: Multihash
    physical_hash: Multihash
    max_event_time: Timestamp | None

    def as_data_slice(self) -> DataSlice:
        """The ``newData`` of the block that commits this slice."""
        return DataSlice(
            logical_hash=self.logical_hash,
            physical_hash=self.physical_hash,
            offset_interval=OffsetInterval(start=self.offset_start, end=self.offset_end),
            size=self.size,
        )


def required_columns(result: pa.Schema, dataset_schema: pa.Schema | None) -> frozenset[str]:
    """The result's columns a transform's slice writes as required: what the engine's plan
    proves non-null (for DataFusion a column read from a required input column, for both
    engines ``ROW_NUMBER()`` or a literal), as the reference's engines write them, except that a
    column the dataset's schema already declares keeps its declared nullability (datasets
    written before this rule keep their schema; a null in a column it requires fails the
    transaction)."""
    declared = {} if dataset_schema is None else {f.name: f.nullable for f in dataset_schema}
    return frozenset(field.name for field in result if not declared.get(field.name, field.nullable))


def slice_schema(
    result: pa.Schema,
    vocab: Vocab,
    required: frozenset[str] = frozenset(),
    *,
    op_required: bool = True,
    declared: pa.Schema | None = None,
) -> pa.Schema:
    """The Arrow schema of a slice made from a result with ``result``'s columns.

    ``offset`` and ``system_time`` are required, ``op`` unless ``op_required`` is false (a
    transform query's own ``op`` keeps its plan's nullability, as the reference writes it); a
    data column is required when named in ``required`` (an ingest decides that from the read
    schema or the dataset's schema, a transform from its plan, as the reference does). Inside a
    column (struct fields, list items, map values) the result's nullability holds, except where
    ``declared`` (the dataset's schema) has the column: there it keeps what it declares at every
    depth (:func:`declared_nesting`).
    """
    fields = [
        pa.field(vocab.offset, OFFSET_TYPE, nullable=False),
        pa.field(vocab.op, OP_TYPE, nullable=not op_required),
        pa.field(vocab.system_time, TIMESTAMP_MS_UTC, nullable=False),
    ]
    for result_field in result:
        if result_field.name in (vocab.offset, vocab.system_time):
            raise OutputSchemaError(
                f"the result has a column '{result_field.name}' that clashes with a system column; "
                "rename it or set a different vocabulary"
            )
        if result_field.name == vocab.op:
            continue
        nullable = result_field.name not in required
        data_type = _normalized_type(result_field.type)
        if declared is not None and declared.get_field_index(result_field.name) >= 0:
            data_type = declared_nesting(data_type, declared.field(result_field.name).type)
        fields.append(pa.field(result_field.name, data_type, nullable))
    return pa.schema(fields)


def declared_nesting(data_type: pa.DataType, declared: pa.DataType) -> pa.DataType:
    """``data_type`` with the nullability ``declared`` gives its struct fields, list items and
    map values, at every depth where both have the same shape (a struct field by name); the
    rest as ``data_type`` has it. A dataset's schema is never rewritten by a later transaction,
    so slices written under it keep its nullability inside columns too (datasets odfd wrote
    before nested fields followed the plan keep their optional nested fields)."""
    if pa.types.is_struct(data_type) and pa.types.is_struct(declared):
        names = {declared.field(i).name: declared.field(i) for i in range(declared.num_fields)}
        return pa.struct(
            [
                _declared_field(data_type.field(i), names.get(data_type.field(i).name))
                for i in range(data_type.num_fields)
            ]
        )
    if pa.types.is_map(data_type) and pa.types.is_map(declared):
        return pa.map_(
            data_type.key_field.with_type(declared_nesting(data_type.key_type, declared.key_type)),
            _declared_field(data_type.item_field, declared.item_field),
            data_type.keys_sorted,
        )
    for is_list, make in _LIST_KINDS:
        if is_list(data_type) and is_list(declared):
            item = _declared_field(data_type.value_field, declared.value_field)
            return make(data_type, item)
    return data_type


def _declared_field(field: pa.Field, declared: pa.Field | None) -> pa.Field:
    if declared is None:
        return field
    return field.with_type(declared_nesting(field.type, declared.type)).with_nullable(
        declared.nullable
    )


_LIST_KINDS: tuple[tuple[Callable[[pa.DataType], bool], Callable[..., pa.DataType]], ...] = (
    (pa.types.is_list, lambda _, item: pa.list_(item)),
    (pa.types.is_large_list, lambda _, item: pa.large_list(item)),
    (pa.types.is_fixed_size_list, lambda t, item: pa.list_(item, t.list_size)),
)


def write_batches(
    result_schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
    *,
    vocab: Vocab,
    start_offset: int,
    system_time: Timestamp,
    out_path: Path,
    required: frozenset[str] = frozenset(),
    op_required: bool = True,
    declared: pa.Schema | None = None,
) -> tuple[pa.Schema, WrittenSlice | None]:
    """Writes a result's batches, in order, as a slice: the path every engine's output takes
    (nullability as :func:`slice_schema` decides it)."""
    schema = slice_schema(
        result_schema, vocab, required, op_required=op_required, declared=declared
    )
    return schema, _write(batches, schema, vocab, start_offset, system_time, out_path)


def _write(
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    vocab: Vocab,
    start_offset: int,
    system_time: Timestamp,
    out_path: Path,
) -> WrittenSlice | None:
    digest = FileDigest(schema)
    next_offset = start_offset
    max_event_time = None
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    with _RowGroupWriter(out_path, schema) as writer, _InTurn("odfd-slice-hash") as hashing:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            out = _to_slice_batch(batch, schema, vocab, next_offset, system_time)
            next_offset += out.num_rows
            max_event_time = _max_event_time(out, vocab, max_event_time)
            pending.append(out)
            pending_rows += out.num_rows
            if pending_rows >= ROW_GROUP_ROWS:
                hashing.submit(_hash_all, digest, pending)
                writer.write(pa.Table.from_batches(pending, schema))
                pending, pending_rows = [], 0
        if next_offset == start_offset:
            return None
        if pending:
            hashing.submit(_hash_all, digest, pending)
            writer.write(pa.Table.from_batches(pending, schema))
        hashing.wait()
        physical_hash = writer.finish()
    return WrittenSlice(
        path=out_path,
        num_records=next_offset - start_offset,
        size=os.path.getsize(out_path),
        offset_start=start_offset,
        offset_end=next_offset - 1,
        logical_hash=digest.finalize(),
        physical_hash=physical_hash,
        max_event_time=max_event_time,
    )


def _hash_all(digest: FileDigest, batches: list[pa.RecordBatch]) -> None:
    for batch in batches:
        digest.update(batch)


class _InTurn:
    """Runs calls one after another on a thread of its own while the caller goes on: each call
    first waits for the one before (so the caller is at most one call ahead) and raises what that
    one raised. Parquet encoding, SHA-3 and the driver's merge all release the GIL, so a big slice
    takes about the longest of them instead of their sum."""

    def __init__(self, name: str) -> None:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._running: Future[None] | None = None

    def __enter__(self) -> _InTurn:
        return self

    def submit(self, call: Callable[..., None], *args: object) -> None:
        self.wait()
        self._running = self._thread.submit(call, *args)

    def wait(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            running.result()

    def __exit__(self, *exc: object) -> None:
        if self._running is not None:
            wait([self._running])
        self._thread.shutdown()


class _RowGroupWriter:
    """Writes row groups in turn on a thread of its own (:class:`_InTurn`) while the caller
    converts and hashes the next batches, hashing the file's bytes as they are written (so the
    physical hash costs no second read). Opens the file on the first write."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self._path = path
        self._schema = schema
        self._sink: _HashedFile | None = None
        self._writer: pq.ParquetWriter | None = None
        self._turns = _InTurn("odfd-slice-writer")

    def __enter__(self) -> _RowGroupWriter:
        return self

    def write(self, table: pa.Table) -> None:
        self._turns.submit(self._write, table)

    def finish(self) -> Multihash:
        """Waits for the last row group and closes the file (raising what the writes raised);
        the file's physical hash."""
        self._turns.wait()
        writer, sink = self._open()
        writer.close()
        sink.close()
        self._writer = self._sink = None
        return sink.physical_hash()

    def __exit__(self, *exc: object) -> None:
        self._turns.__exit__(*exc)
        if self._writer is not None:
            self._writer.close()
        if self._sink is not None:
            self._sink.close()

    def _write(self, table: pa.Table) -> None:
        self._open()[0].write_table(table)

    def _open(self) -> tuple[pq.ParquetWriter, _HashedFile]:
        if self._writer is None or self._sink is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._sink = _HashedFile(self._path)
            self._writer = open_slice_writer(self._sink, self._schema)
        return self._writer, self._sink


class _HashedFile(io.RawIOBase):
    """A file being written whose bytes are SHA3-256 hashed on their way to it."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = open(path, "wb")
        self._hasher = PhysicalHasher()
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._hasher.update(view)
        self._file.write(view)
        self._position += len(view)
        return len(view)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        super().close()  # flushes first
        self._file.close()

    def physical_hash(self) -> Multihash:
        return self._hasher.multihash()


def open_slice_writer(where: Path | io.RawIOBase, schema: pa.Schema) -> pq.ParquetWriter:
    """A slice's Parquet writer, at a path (its folder made) or into an open file."""
    if isinstance(where, Path):
        where.parent.mkdir(parents=True, exist_ok=True)
    return pq.ParquetWriter(
        str(where) if isinstance(where, Path) else where,
        schema,
        compression="snappy",
        data_page_version="1.0",
        write_statistics=True,
    )


def _to_slice_batch(
    batch: pa.RecordBatch, schema: pa.Schema, vocab: Vocab, start: int, system_time: Timestamp
) -> pa.RecordBatch:
    n = batch.num_rows
    offsets = pa.array(np.arange(start, start + n, dtype=np.int64), OFFSET_TYPE)
    if vocab.op in batch.schema.names:
        op = batch.column(vocab.op).cast(OP_TYPE)
        if op.null_count:
            raise OutputSchemaError(
                f"the result's operation type column '{vocab.op}' has null values"
            )
    else:
        op = pa.array(np.zeros(n, dtype=np.int32), OP_TYPE)
    system_times = pa.array(np.full(n, system_time.epoch_millis, dtype=np.int64), pa.int64()).cast(
        TIMESTAMP_MS_UTC
    )
    columns = [offsets, op, system_times]
    for target in list(schema)[3:]:
        column = batch.column(target.name)
        if not target.nullable and column.null_count:
            raise NullValuesError(target.name, column.null_count)
        if column.type != target.type:
            check_nested_nulls(column, target.type, target.name)
        columns.append(_normalize(column, target.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def check_nested_nulls(column: pa.Array, target: pa.DataType, path: str) -> None:
    """Raises :class:`NullValuesError` naming the first struct field, list item or map value
    (``st.a``, ``l[]``, ``m{}``) that ``target`` makes required and ``column`` holds nulls in
    (a value under a null parent does not count). Arrow's casts would let a null list item
    through, and the Parquet writer's refusal would name neither the column nor the count."""
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        children = column.flatten()  # each with the struct's own nulls merged in
        for index in range(column.type.num_fields):
            name = column.type.field(index).name
            position = target.get_field_index(name)
            if position < 0:
                continue
            field = target.field(position)
            child, where = children[index], f"{path}.{name}"
            nulls = child.null_count - column.null_count
            if not field.nullable and nulls:
                raise NullValuesError(where, nulls)
            check_nested_nulls(child, field.type, where)
    elif pa.types.is_map(target) and pa.types.is_map(column.type):
        items, where = _map_items(column), f"{path}{{}}"
        if not target.item_field.nullable and items.null_count:
            raise NullValuesError(where, items.null_count)
        check_nested_nulls(items, target.item_type, where)
    elif any(is_list(target) and is_list(column.type) for is_list, _ in _LIST_KINDS):
        items, where = column.flatten(), f"{path}[]"
        if not target.value_field.nullable and items.null_count:
            raise NullValuesError(where, items.null_count)
        check_nested_nulls(items, target.value_type, where)


def _map_items(column: pa.MapArray) -> pa.Array:
    """The values of the maps in ``column`` (a slice of the array's children reaches past it)."""
    offsets = column.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    return column.items.slice(first, last - first)


def _normalized_type(data_type: pa.DataType) -> pa.DataType:
    """Timestamps become milliseconds in UTC, as the reference stores them; nothing else changes."""
    if pa.types.is_timestamp(data_type):
        return TIMESTAMP_MS_UTC
    return data_type


def _normalize(column: pa.Array, target: pa.DataType) -> pa.Array:
    if column.type == target:
        return column
    if pa.types.is_timestamp(column.type):
        # Sub-millisecond digits are dropped (truncated), as the reference does.
        if column.type.tz is None:
            column = pc.assume_timezone(column, "UTC")
        return pc.cast(column, target, safe=False)
    return column.cast(target)


def _max_event_time(
    batch: pa.RecordBatch, vocab: Vocab, current: Timestamp | None
) -> Timestamp | None:
    if vocab.event_time not in batch.schema.names:
        return current
    value = pc.max(batch.column(vocab.event_time)).as_py()
    if value is None:
        return current
    if isinstance(value, datetime):
        candidate = Timestamp.from_datetime(value)
    elif isinstance(value, date):
        candidate = Timestamp.of(value.year, value.month, value.day)
    else:
        raise OutputSchemaError(
            f"event time column '{vocab.event_time}' must be a timestamp or a date, found {batch.schema.field(vocab.event_time).type}"
        )
    return candidate if current is None or candidate > current else current
