"""Blocking checks of one data or checkpoint file against what its block records.

A data slice is read once (:func:`check_slice`): its bytes go into one buffer that feeds both the
physical hash and the Parquet decoder, whose record batches stream into the logical hash and the
vectorised column checks (batches as ``protocol.hashing.hashing_batches`` cuts them). The calling
thread decodes; the physical hash and the logical hash's columns run on the ``hashing`` executor's
threads, side by side (SHA3, Arrow and NumPy release the GIL). Slices larger than
:data:`IN_MEMORY_BYTES` are instead streamed twice at once in bounded memory — the physical hash
in fixed-size chunks, the content through a small read buffer — so a check's memory is bounded by
that constant, never by the size of the data.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from protocol.hashing import (
    RecordsDigest,
    UnsupportedDataTypeError,
    hashing_batches,
    open_parquet,
)
from protocol.hashing.parquet_files import STREAM_BUFFER_BYTES
from protocol.hashing.physical import IN_MEMORY_BYTES
from protocol.identity import Multicodec, Multihash
from protocol.model import DataSlice
from verifier.engine.columns import Op, Vocab
from verifier.report import Status

CHUNK_BYTES = 1 << 20
"""Read size of the physical hash."""

INLINE_BYTES = 1 << 20
"""Slices up to this size are hashed on the thread that reads them: handing a few small blocks
to the hashing threads costs more than hashing them (the new files of an incremental audit)."""

#: Types the system columns may have: what the spec says (uint64 / uint8) and what the
#: reference and our pipeline write (int64 / int32).
OFFSET_TYPES = (pa.int64(), pa.uint64())
OP_TYPES = (pa.int32(), pa.uint8())
UTC_ZONES = frozenset({"UTC", "Etc/UTC", "+00:00", "Z"})

_DATA = "event.newData"
_READ_ERRORS = (OSError, pa.ArrowException)

OnBytes = Callable[[int], None]
"""Receives how many more bytes of the file were checked (for progress)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A finding before the caller places it in a block and a file."""

    status: Status
    rule: str
    field: str | None
    message: str
    expected: str | None = None
    actual: str | None = None


def _read_failure(field: str, path: Path, err: OSError) -> FileCheck:
    """A file that is missing or cannot be read: the check's one finding."""
    if isinstance(err, FileNotFoundError):
        message, rule = f"the file {path.name} is missing", "missing-file"
    else:
        message, rule = f"cannot read the file: {err}", "unreadable"
    return FileCheck((_failed(rule, f"{field}.physicalHash", message),))


def _failed(
    rule: str, field: str | None, message: str, expected: object = None, actual: object = None
) -> Problem:
    return Problem(
        Status.FAILED,
        rule,
        field,
        message,
        None if expected is None else str(expected),
        None if actual is None else str(actual),
    )


@dataclass(frozen=True, slots=True)
class FileCheck:
    problems: tuple[Problem, ...]
    records: int = 0


def fetched_hash_mismatch(field: str, expected: Multihash, actual: Multihash) -> FileCheck:
    """An object whose bytes, fetched from a bucket, hashed to ``actual``: the finding a local
    file with those bytes gives (such bytes never enter the workspace's cache)."""
    message = f"the object's bytes hash to {actual}"
    return FileCheck(
        (_failed("physical-hash", f"{field}.physicalHash", message, expected, actual),)
    )


def check_object(
    path: Path, expected_hash: Multihash, expected_size: int, field: str, on_bytes: OnBytes
) -> FileCheck:
    """The file exists, has the recorded size, and its bytes hash to the recorded physical hash."""
    try:
        size = path.stat().st_size
        if size != expected_size:
            message = f"the file is {size} bytes, the block records {expected_size}"
            return FileCheck((_failed("size", f"{field}.size", message, expected_size, size),))
        actual = _sha3_file(path, on_bytes)
    except OSError as err:
        return _read_failure(field, path, err)
    if actual != expected_hash:
        message = f"the file's bytes hash to {actual}"
        return FileCheck(
            (_failed("physical-hash", f"{field}.physicalHash", message, expected_hash, actual),)
        )
    return FileCheck(())


def _sha3_file(path: Path, on_bytes: OnBytes) -> Multihash:
    hasher = hashlib.sha3_256()
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as file:
        while count := file.readinto(buffer):
            hasher.update(view[:count])
            on_bytes(count)
    return Multihash(Multicodec.SHA3_256, hasher.digest())


def _sha3_buffer(data: memoryview) -> Multihash:
    return Multihash(Multicodec.SHA3_256, hashlib.sha3_256(data).digest())


GROWTH_HEADROOM = 8
"""A read buffer outgrown by a slice is replaced by one 1/8 larger than that slice, so that the
next slices, a few bytes larger or smaller, fit it: slices of one dataset are rarely the same
size, and each new buffer costs the zeroing of every page (8 slices of 56 MB on 2 threads made
5 new buffers: 40,000 of the audit's 100,000 page faults)."""


class _ReadBuffer(threading.local):
    """Each file thread's buffer for the slices it reads whole, reused from slice to slice:
    fresh memory for every slice would cost a page fault and the zeroing of a page per 4 KiB read
    (a tenth of a slice check's CPU). A check is done with its bytes before its thread reads the
    next slice: it waits for the physical hash, and the decoded records are copies."""

    def __init__(self) -> None:
        self.data = bytearray()

    def read(self, path: Path, size: int) -> memoryview:
        """``path``'s bytes (``size`` expected; a file that grew since is read whole all the same)."""
        if len(self.data) < size + 1:  # one byte more than expected: a file that grew shows
            self.data = bytearray(size + 1 + size // GROWTH_HEADROOM)
        view = memoryview(self.data)
        filled = 0
        with open(path, "rb", buffering=0) as file:
            while filled < len(view) and (count := file.readinto(view[filled:])):
                filled += count
            if filled == len(view):
                return memoryview(bytes(view) + file.read())
        return view[:filled]


_read_buffer = _ReadBuffer()


def _ignore(count: int) -> None:
    """Progress of a second pass over a file, already counted by the first."""


@dataclass(frozen=True, slots=True)
class SliceExpectation:
    """What a data slice's content must be, from its block and the metadata before it."""

    data_slice: DataSlice
    vocab: Vocab
    declared_columns: tuple[str, ...] | None
    """Column names of the ``SetDataSchema`` in effect, ``None`` if none was declared."""
    declared_in: str | None = None
    """Where that schema was declared (e.g. ``block #3``), for messages."""


def check_slice(
    path: Path,
    expected_hash: Multihash,
    expected_size: int,
    expected: SliceExpectation,
    on_bytes: OnBytes,
    hashing: Executor,
) -> FileCheck:
    """A data slice's size, physical hash and content, from one read of its bytes."""
    field = _DATA
    try:
        size = path.stat().st_size
        data = None if size > IN_MEMORY_BYTES else _read_buffer.read(path, size)
    except OSError as err:
        return _read_failure(field, path, err)
    if data is None:
        streamed = hashing.submit(check_object, path, expected_hash, expected_size, field, _ignore)
        content = check_slice_content(path, expected, on_bytes, hashing)
        return FileCheck(streamed.result().problems + content.problems, content.records)
    problems: list[Problem] = []
    sized = len(data) == expected_size
    if not sized:
        message = f"the file is {len(data)} bytes, the block records {expected_size}"
        problems.append(_failed("size", f"{field}.size", message, expected_size, len(data)))
    inline = len(data) <= INLINE_BYTES
    physical = hashing.submit(_sha3_buffer, data) if sized and not inline else None
    content = _scan_parquet(
        pa.BufferReader(pa.py_buffer(data)),
        len(data),
        expected,
        on_bytes,
        None if inline else hashing,
    )
    actual = physical.result() if physical is not None else None
    if sized and inline:
        actual = _sha3_buffer(data)
    if actual is not None and actual != expected_hash:
        message = f"the file's bytes hash to {actual}"
        problems.append(
            _failed("physical-hash", f"{field}.physicalHash", message, expected_hash, actual)
        )
    return FileCheck((*problems, *content.problems), content.records)


def check_slice_content(
    path: Path, expected: SliceExpectation, on_bytes: OnBytes, hashing: Executor
) -> FileCheck:
    """Re-reads a slice: logical hash, record count, offsets, system columns, declared schema.

    A missing file is the physical check's finding, not this one's.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return FileCheck(())
    return _scan_parquet(str(path), size, expected, on_bytes, hashing)


def _scan_parquet(
    source: str | pa.BufferReader,
    size: int,
    expected: SliceExpectation,
    on_bytes: OnBytes,
    hashing: Executor | None,
) -> FileCheck:
    try:
        parquet = open_parquet(source, STREAM_BUFFER_BYTES if isinstance(source, str) else 0)
        schema = parquet.schema_arrow
    except FileNotFoundError:
        return FileCheck(())
    except _READ_ERRORS as err:
        return FileCheck((_failed("unreadable", _DATA, f"not a readable Parquet file: {err}"),))
    with parquet:
        return _Scan(schema, expected, hashing).run(parquet, size, on_bytes)


class _Scan:
    """One pass over a slice's records feeding the logical hash and the column checks."""

    def __init__(
        self, schema: pa.Schema, expected: SliceExpectation, hashing: Executor | None
    ) -> None:
        self.expected = expected
        self.problems = [*_schema_problems(schema, expected)]
        self.digest: RecordsDigest | None = None
        try:
            self.digest = RecordsDigest(schema, hashing)
        except UnsupportedDataTypeError as err:
            self._cannot_hash(err)
        self.columns = _ColumnChecks(
            schema, expected.vocab, expected.data_slice.offset_interval.start
        )

    def _cannot_hash(self, err: UnsupportedDataTypeError) -> None:
        self.problems.append(
            Problem(Status.CANNOT_VERIFY, "unsupported-type", f"{_DATA}.logicalHash", str(err))
        )
        self.digest = None

    def run(self, parquet: pq.ParquetFile, size: int, on_bytes: OnBytes) -> FileCheck:
        total_rows = max(parquet.metadata.num_rows, 1)
        rows = 0
        try:
            for batch in hashing_batches(parquet):
                if self.digest is not None:
                    try:
                        self.digest.update(batch)
                    except UnsupportedDataTypeError as err:
                        self._cannot_hash(err)
                self.columns.update(batch)
                rows += batch.num_rows
                on_bytes(size * batch.num_rows // total_rows)
        except _READ_ERRORS as err:
            self.problems.append(
                _failed("unreadable", _DATA, f"reading past record {rows} failed: {err}")
            )
            return FileCheck(tuple(self.problems), rows)
        self.problems.extend(self.columns.problems)
        self._check_totals(rows)
        return FileCheck(tuple(self.problems), rows)

    def _check_totals(self, rows: int) -> None:
        recorded = self.expected.data_slice
        interval = recorded.offset_interval
        wanted = interval.end - interval.start + 1
        if rows != wanted:
            message = (
                f"the file holds {rows} records, the offset interval [{interval.start}, {interval.end}] "
                f"needs {wanted}"
            )
            self.problems.append(
                _failed("record-count", f"{_DATA}.offsetInterval", message, wanted, rows)
            )
        if self.digest is not None:
            actual = self.digest.finalize()
            if actual != recorded.logical_hash:
                message = f"the records hash to {actual}"
                self.problems.append(
                    _failed(
                        "logical-hash",
                        f"{_DATA}.logicalHash",
                        message,
                        recorded.logical_hash,
                        actual,
                    )
                )


def _schema_problems(schema: pa.Schema, expected: SliceExpectation) -> Iterator[Problem]:
    vocab = expected.vocab
    checks: tuple[tuple[str, str, Callable[[pa.DataType], bool]], ...] = (
        (vocab.offset, "int64 or uint64", _is_offset_type),
        (vocab.op, "int32 or uint8", _is_op_type),
        (vocab.system_time, "timestamp in UTC", _is_utc_timestamp),
        (
            vocab.event_time,
            "timestamp in UTC or date",
            lambda t: _is_utc_timestamp(t) or pa.types.is_date(t),
        ),
    )
    for name, wanted, accepts in checks:
        index = schema.get_field_index(name)
        if index < 0:
            yield _failed("system-column", None, f"system column '{name}' is missing")
        elif not accepts(schema.field(index).type):
            yield _failed(
                "system-column",
                None,
                f"system column '{name}' is {schema.field(index).type}, expected {wanted}",
            )
    if expected.declared_columns is not None and tuple(schema.names) != expected.declared_columns:
        message = f"the file's columns differ from the schema declared in {expected.declared_in}"
        yield _failed(
            "declared-schema",
            None,
            message,
            ", ".join(expected.declared_columns),
            ", ".join(schema.names),
        )


def _is_offset_type(data_type: pa.DataType) -> bool:
    return data_type in OFFSET_TYPES


def _is_op_type(data_type: pa.DataType) -> bool:
    return data_type in OP_TYPES


def _is_utc_timestamp(data_type: pa.DataType) -> bool:
    return pa.types.is_timestamp(data_type) and data_type.tz in UTC_ZONES


def _offset_values(column: pa.Array) -> np.ndarray:
    """The values of an offset column without nulls, viewed in place. ``Array.to_numpy`` would
    import pandas on its first call (0.3 s of CPU holding the GIL in an audit's first check,
    which kept the other jobs from starting)."""
    dtype = np.dtype(np.uint64 if pa.types.is_uint64(column.type) else np.int64)
    return np.frombuffer(
        column.buffers()[1], dtype=dtype, count=len(column), offset=column.offset * dtype.itemsize
    )


def _column_if(schema: pa.Schema, name: str, accepts: Callable[[pa.DataType], bool]) -> str | None:
    """``name`` if the file has that column with an acceptable type (else its values are not checked)."""
    index = schema.get_field_index(name)
    return name if index >= 0 and accepts(schema.field(index).type) else None


class _ColumnChecks:
    """Offsets run exactly ``start..``, ``op`` holds operation types, no system value is null.

    Reports the first problem of each kind only: one bad row is enough to fail a file, and a
    shifted offset would otherwise be reported on every following row.
    """

    def __init__(self, schema: pa.Schema, vocab: Vocab, start: int) -> None:
        self.problems: list[Problem] = []
        self._next_offset = start
        self._row = 0
        self._offset = _column_if(schema, vocab.offset, _is_offset_type)
        self._op = _column_if(schema, vocab.op, _is_op_type)
        self._system_time = _column_if(schema, vocab.system_time, _is_utc_timestamp)

    def update(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        rows = f"rows {self._row}..{self._row + n - 1}"
        if self._offset is not None:
            self._check_offsets(batch.column(self._offset), rows)
        if self._op is not None:
            self._check_op(batch.column(self._op), rows)
        if self._system_time is not None and batch.column(self._system_time).null_count:
            nulls = batch.column(self._system_time).null_count
            self._report(
                "_system_time",
                _failed(
                    "system-column",
                    None,
                    f"system column '{self._system_time}' has {nulls} null value(s) in {rows}",
                ),
            )
        self._next_offset += batch.num_rows
        self._row += batch.num_rows

    def _check_offsets(self, column: pa.Array, rows: str) -> None:
        field = f"{_DATA}.offsetInterval"
        if column.null_count:
            self._report(
                "_offset",
                _failed(
                    "offset-values", field, f"offset column '{self._offset}' has nulls in {rows}"
                ),
            )
            return
        values = _offset_values(column)
        wanted = np.arange(self._next_offset, self._next_offset + len(values), dtype=values.dtype)
        wrong = np.flatnonzero(values != wanted)
        if wrong.size:
            i = int(wrong[0])
            found, expected = int(values[i]), int(wanted[i])
            message = (
                f"row {self._row + i} has offset {found}, expected {expected} "
                "(offsets must run consecutively from the interval's start)"
            )
            self._report("_offset", _failed("offset-values", field, message, expected, found))

    def _check_op(self, column: pa.Array, rows: str) -> None:
        if column.null_count:
            self._report(
                "_op",
                _failed(
                    "op-values", None, f"operation type column '{self._op}' has nulls in {rows}"
                ),
            )
            return
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        lowest, highest = int(min(Op)), int(max(Op))
        if low is not None and (low < lowest or high > highest):
            bad = low if low < lowest else high
            message = (
                f"operation type column '{self._op}' holds {bad}, which is not an operation type "
                f"({lowest}..{highest})"
            )
            self._report("_op", _failed("op-values", None, message))

    def _report(self, column_attribute: str, problem: Problem) -> None:
        """Records ``problem`` and stops checking that column."""
        self.problems.append(problem)
        setattr(self, column_attribute, None)
