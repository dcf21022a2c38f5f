"""The logical hash of tabular data: arrow-digest ``RecordsDigestV0`` with SHA3-256.

ODF's ``DataSlice.logicalHash`` must equal what kamu-cli computes with the arrow-digest crate, so
this follows that crate's code (not its README where they differ):

- Schema: depth-first over the fields, descending into structs only, each field contributes
  ``u64 len(name)``, its UTF-8 name and ``u64 nesting level``. Types and nullability do not.
- Each leaf (non-struct) column has its own hasher, started with its type's encoding
  (``data_types``) and fed its values' records (``value_stream``) batch after batch.
- The result hashes the schema bytes followed by every leaf column's digest, in schema order.
- Nulls of struct parents reach their leaves through arrow-digest's combining rule
  (``_combine``), which is *not* "null if any ancestor is null": when both a parent and a child
  have nulls in a batch, a value is null only where both are; a combination that leaves no nulls
  stops any further nulls from applying below it. It depends on which rows share a batch, so for
  structs with nulls at two levels the hash depends on batch boundaries, as it does in the
  reference; a Parquet file is therefore hashed in the reference's batches (``parquet_files``).

Given an executor, a digest encodes its leaf columns' blocks on the executor's threads as they
arrive and SHA3s each column's records in order (``lanes``), while the caller goes on decoding;
``finalize`` waits for them.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from protocol.hashing.data_types import encode_data_type, logical_schema, logical_type
from protocol.hashing.errors import SchemaMismatchError, UnsupportedDataTypeError
from protocol.hashing.lanes import Lanes
from protocol.hashing.value_stream import dictionary_encodable, encode, validity_mask
from protocol.identity import Multicodec, Multihash

PARQUET_BATCH_ROWS = 10_000
"""Rows per batch kamu-cli reads a Parquet file in to hash it (``LOGICAL_HASH_BATCH_SIZE``)."""

_BLOCK_ROWS = 1 << 18
"""Rows encoded at once within a batch: bounds the temporary buffers of wide or nested values."""

_PENDING_BATCHES = 3
"""Batches a digest with an executor may hold before ``update`` waits: enough to keep every
column's lane busy while the next batch is read, few enough to bound memory."""


@dataclass(frozen=True, slots=True)
class _Nulls:
    """A validity bitmap passed from a struct to its children, with its null count.

    A combined bitmap can have no nulls yet still be present; the reference treats that state
    differently from an absent bitmap, so it is kept distinct from ``None``.
    """

    valid: np.ndarray
    null_count: int

    @classmethod
    def of(cls, array: pa.Array) -> _Nulls | None:
        valid = validity_mask(array)
        return None if valid is None else cls(valid, array.null_count)


def _combine(parent: _Nulls | None, own: _Nulls | None) -> _Nulls | None:
    """arrow-digest's ``maybe_combine_null_buffers``: which rows its hasher treats as null.

    ``own`` is ``None`` when the array has no nulls (the reference drops empty bitmaps).
    """
    if parent is None:
        return own
    if parent.null_count == 0:
        return None
    if own is None:
        return parent
    either_valid = parent.valid | own.valid
    return _Nulls(either_valid, int(np.count_nonzero(~either_valid)))


@dataclass(frozen=True, slots=True)
class _Leaf:
    """A leaf column of the schema: its dotted path and its running hasher."""

    path: str
    hasher: hashlib._Hash


class RecordsDigest:
    """Incremental logical hash of record batches that share one schema.

    The hash does not depend on how rows are split into batches (except as the module docstring
    explains for structs with nulls at two levels), on dictionary encoding, on ``string`` vs
    ``large_string`` and the like, nor on whether an array without nulls has a validity bitmap.
    """

    def __init__(self, schema: pa.Schema, executor: Executor | None = None) -> None:
        self._schema = logical_schema(schema)
        self._schema_hasher = hashlib.sha3_256()
        self._leaves: list[_Leaf] = []
        self._signature = _signature(self._schema)
        self._accepted_schemas: list[pa.Schema] = [schema]
        self._add_fields(self._schema, level=0, prefix="")
        self._lanes = (
            None
            if executor is None
            else Lanes(executor, len(self._leaves), _PENDING_BATCHES * max(len(self._leaves), 1))
        )

    def copy(self) -> RecordsDigest:
        """A digest in this one's state, updated on its own from now on (as ``hashlib``'s
        ``copy``): a digest started once per schema is copied for each file of that schema
        instead of deriving the schema's encodings again (~0.03 ms per file). One with an
        executor cannot be copied while its lanes may still be feeding it."""
        if self._lanes is not None:
            raise ValueError("a RecordsDigest with an executor cannot be copied")
        twin = RecordsDigest.__new__(RecordsDigest)
        twin._schema = self._schema
        twin._schema_hasher = self._schema_hasher.copy()
        twin._leaves = [_Leaf(leaf.path, leaf.hasher.copy()) for leaf in self._leaves]
        twin._signature = self._signature
        twin._accepted_schemas = list(self._accepted_schemas)
        twin._lanes = None
        return twin

    @property
    def schema(self) -> pa.Schema:
        """The schema as hashed: dictionaries decoded, extension types as their storage."""
        return self._schema

    def _add_fields(self, fields: Iterable[pa.Field], level: int, prefix: str) -> None:
        for field in fields:
            name = field.name.encode()
            self._schema_hasher.update(
                struct.pack("<Q", len(name)) + name + struct.pack("<Q", level)
            )
            path = prefix + field.name
            if pat.is_struct(field.type):
                self._add_fields(field.type, level + 1, path + ".")
            else:
                hasher = hashlib.sha3_256(encode_data_type(field.type, path))
                self._leaves.append(_Leaf(path, hasher))

    def update(self, batch: pa.RecordBatch) -> None:
        """Hash the rows of ``batch``, which must have this digest's schema (as hashed).

        With an executor, each block of a column is encoded on any of its threads as soon as it
        is handed over, and SHA3'd in order in the column's lane (Arrow and NumPy kernels and
        SHA3 release the GIL), so the caller only decodes, every core encodes, and a column's
        chain of steps in order is its SHA3 alone; ``finalize`` waits for them. Without one, all
        of it runs here.
        """
        self._check_schema(batch.schema)
        for lane, (leaf, array, valid) in enumerate(self._leaf_columns(batch)):
            for start in range(0, len(array), _BLOCK_ROWS):
                block_valid = None if valid is None else valid[start : start + _BLOCK_ROWS]
                block = array.slice(start, _BLOCK_ROWS)
                if self._lanes is None:
                    leaf.hasher.update(_records(block, block_valid))
                else:
                    self._lanes.submit_prepared(
                        lane, partial(_records, block, block_valid), leaf.hasher.update
                    )

    def _check_schema(self, schema: pa.Schema) -> None:
        if any(schema.equals(seen) for seen in self._accepted_schemas):
            return
        if _signature(logical_schema(schema)) != self._signature:
            raise SchemaMismatchError(
                f"record batch schema does not match the schema being hashed:\n"
                f"expected:\n{self._schema}\ngot:\n{schema}"
            )
        self._accepted_schemas.append(schema)

    def _leaf_columns(self, batch: pa.RecordBatch) -> list[_LeafColumn]:
        """Each leaf column of ``batch`` as hashed, with the validity its values are hashed under
        (``None``: all valid), in schema order."""
        columns: list[_LeafColumn] = []
        leaves = iter(self._leaves)
        for column in batch.columns:
            _collect_leaves(column, None, leaves, columns)
        return columns

    def finalize(self) -> Multihash:
        """The hash of everything fed so far; the digest can keep being updated afterwards."""
        if self._lanes is not None:
            self._lanes.wait()
        hasher = self._schema_hasher.copy()
        for leaf in self._leaves:
            hasher.update(leaf.hasher.digest())
        return Multihash(Multicodec.ARROW0_SHA3_256, hasher.digest())


_LeafColumn = tuple[_Leaf, pa.Array, "np.ndarray | None"]


def _records(block: pa.Array, valid: np.ndarray | None) -> memoryview:
    """The bytes ``block`` feeds its column's hasher (with an executor, built on any of its
    threads; the lane then feeds them to the hasher in order)."""
    records = encode(block, valid, False).data
    return records.data if isinstance(records, np.ndarray) else records


def _collect_leaves(
    array: pa.Array, parent: _Nulls | None, leaves: Iterator[_Leaf], into: list[_LeafColumn]
) -> None:
    """Appends the leaf columns under ``array`` to ``into`` (a plain recursive function: a
    recursive closure would be a reference cycle keeping each batch's arrays alive until the
    garbage collector runs)."""
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if pat.is_struct(array.type):
        combined = _combine(parent, _Nulls.of(array))
        for index in range(array.type.num_fields):
            _collect_leaves(array.field(index), combined, leaves, into)
        return
    leaf = next(leaves)
    if not dictionary_encodable(array):
        array = _to_logical(array, leaf.path)
    nulls = _combine(parent, _Nulls.of(array))
    into.append((leaf, array, nulls.valid if nulls is not None and nulls.null_count else None))


def _signature(schema: pa.Schema) -> list[tuple[str, int, bytes | None]]:
    """What the hash sees of a schema: names, nesting levels and leaf type encodings."""
    signature: list[tuple[str, int, bytes | None]] = []

    def walk(fields: Iterable[pa.Field], level: int, prefix: str) -> None:
        for field in fields:
            path = prefix + field.name
            if pat.is_struct(field.type):
                signature.append((field.name, level, None))
                walk(field.type, level + 1, path + ".")
            else:
                signature.append((field.name, level, encode_data_type(field.type, path)))

    walk(schema, 0, "")
    return signature


def _to_logical(array: pa.Array, column: str) -> pa.Array:
    """``array`` with dictionaries decoded and extension arrays unwrapped."""
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if logical_type(array.type) == array.type:
        return array
    try:
        return array.cast(logical_type(array.type))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as error:
        raise UnsupportedDataTypeError(column, array.type, f"cannot decode it: {error}") from error


def logical_hash(
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch], schema: pa.Schema | None = None
) -> Multihash:
    """The logical hash of a table, a batch, or batches (``schema`` is needed if there are none)."""
    if isinstance(data, pa.Table):
        schema, batches = data.schema, data.to_batches()
    elif isinstance(data, pa.RecordBatch):
        schema, batches = data.schema, [data]
    else:
        batches = iter(data)
        first = next(batches, None)
        if first is None and schema is None:
            raise SchemaMismatchError(
                "cannot hash an empty sequence of record batches without a schema"
            )
        if first is not None:
            schema = schema or first.schema
            batches = _prepend(first, batches)
    digest = RecordsDigest(schema)
    for batch in batches:
        digest.update(batch)
    return digest.finalize()


def _prepend(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def exact_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Re-cut ``batches`` into runs of exactly :data:`PARQUET_BATCH_ROWS` rows (the last shorter),
    the batches the reference hashes a file in."""
    recut = _Recut()
    for batch in batches:
        yield from recut.push(batch)
    yield from recut.rest()


class FileDigest:
    """The logical hash of batches being written to a file, fed to the digest re-cut as
    :func:`logical_hash_parquet` will read the file back, so both agree even for data whose hash
    depends on batch boundaries (see the module docstring)."""

    def __init__(self, schema: pa.Schema) -> None:
        self._digest = RecordsDigest(schema)
        self._recut = _Recut()

    def update(self, batch: pa.RecordBatch) -> None:
        for exact in self._recut.push(batch):
            self._digest.update(exact)

    def finalize(self) -> Multihash:
        for exact in self._recut.rest():
            self._digest.update(exact)
        return self._digest.finalize()


class _Recut:
    def __init__(self) -> None:
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0

    def push(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if not self._pending and batch.num_rows == PARQUET_BATCH_ROWS:
            return [batch]
        self._pending.append(batch)
        self._rows += batch.num_rows
        out = []
        while self._rows >= PARQUET_BATCH_ROWS:
            merged = pa.concat_batches(self._pending)
            out.append(merged.slice(0, PARQUET_BATCH_ROWS))
            rest = merged.slice(PARQUET_BATCH_ROWS)
            self._pending, self._rows = ([rest] if rest.num_rows else []), rest.num_rows
        return out

    def rest(self) -> list[pa.RecordBatch]:
        pending, self._pending, self._rows = self._pending, [], 0
        return [pa.concat_batches(pending)] if pending else []
