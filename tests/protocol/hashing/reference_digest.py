"""A straightforward arrow-digest ``RecordsDigestV0``: one value at a time, read from raw buffers.

It follows the reference crate's code (``record_digest.rs``, ``array_digest.rs``, ``utils.rs``)
line by line, with no vectorisation and no fast paths, so the property tests can check that
``protocol.hashing``'s fast paths hash exactly what it does. Values under nulls are read from the
buffers, as the crate reads them. Dictionary and extension columns are decoded first, as a reader
without those encodings (kamu-cli reading the same Parquet file) sees them.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.types as pat

from protocol.hashing.data_types import encode_data_type, logical_schema, logical_type


@dataclass(frozen=True)
class Nulls:
    """A validity bitmap as arrow-rs's ``NullBuffer``: one bool per row and its null count."""

    valid: list[bool]

    @property
    def null_count(self) -> int:
        return self.valid.count(False)


def own_nulls(array: pa.Array) -> Nulls | None:
    """The array's validity; ``None`` without a null in its rows, as arrow-rs drops such a
    bitmap when it builds or imports (through the C data interface) an array."""
    if array.buffers()[0] is None:
        return None
    bitmap = array.buffers()[0].to_pybytes()
    nulls = Nulls([_bit(bitmap, array.offset + i) for i in range(len(array))])
    return nulls if nulls.null_count else None


def combine(parent: Nulls | None, own: Nulls | None) -> Nulls | None:
    """``maybe_combine_null_buffers``."""
    if parent is None and own is not None and own.null_count:
        return own
    if own is None and parent is not None and parent.null_count:
        return parent
    if parent is not None and own is not None and parent.null_count and own.null_count:
        return Nulls([a or b for a, b in zip(parent.valid, own.valid, strict=True)])
    return None


def _bit(bitmap: bytes, index: int) -> bool:
    return bool(bitmap[index // 8] >> (index % 8) & 1)


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def reference_hash(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> bytes:
    """The digest (32 bytes) of ``batches``, all of ``schema``."""
    schema = logical_schema(schema)
    schema_hasher = hashlib.sha3_256()
    leaves: list[hashlib._Hash] = []

    def add_fields(fields: Iterable[pa.Field], level: int) -> None:
        for field in fields:
            name = field.name.encode()
            schema_hasher.update(_u64(len(name)) + name + _u64(level))
            if pat.is_struct(field.type):
                add_fields(field.type, level + 1)
            else:
                leaves.append(hashlib.sha3_256(encode_data_type(field.type, field.name)))

    add_fields(schema, 0)
    for batch in batches:
        remaining = iter(leaves)
        for column in batch.columns:
            _walk(_decoded(column), None, remaining)
    for leaf in leaves:
        schema_hasher.update(leaf.digest())
    return schema_hasher.digest()


def _walk(array: pa.Array, parent: Nulls | None, leaves: Iterator[hashlib._Hash]) -> None:
    if pat.is_struct(array.type):
        combined = combine(parent, own_nulls(array))
        for index in range(array.type.num_fields):
            _walk(array.field(index), combined, leaves)
    else:
        update_array(next(leaves), array, parent)


def _decoded(array: pa.Array) -> pa.Array:
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    return array if logical_type(array.type) == array.type else array.cast(logical_type(array.type))


def update_array(hasher: hashlib._Hash, array: pa.Array, parent: Nulls | None) -> None:
    """``ArrayDigestV0::update``: every value's record, or a zero byte where the combined
    validity says null."""
    nulls = combine(parent, own_nulls(array))
    # An absent buffer (no validity bitmap, no string data) reads as empty.
    buffers = [b"" if buffer is None else buffer.to_pybytes() for buffer in _own_buffers(array)]
    for i in range(len(array)):
        if nulls is not None and not nulls.valid[i]:
            hasher.update(b"\x00")
        else:
            _update_value(hasher, array, buffers, i)


def _own_buffers(array: pa.Array) -> list[pa.Buffer | None]:
    """The array's buffers without its children's (a list's items are hashed as sub-arrays)."""
    data_type = array.type
    if pat.is_binary_view(data_type) or pat.is_string_view(data_type):
        return array.buffers()
    if pat.is_list(data_type) or pat.is_large_list(data_type) or pat.is_fixed_size_list(data_type):
        return array.buffers()[:2]
    return array.buffers()[:3]


def _update_value(hasher: hashlib._Hash, array: pa.Array, buffers: list[bytes], i: int) -> None:
    data_type = array.type
    slot = array.offset + i
    if pat.is_boolean(data_type):
        hasher.update(bytes([_bit(buffers[1], slot) + 1]))
    elif pat.is_fixed_size_binary(data_type):
        width = data_type.byte_width
        hasher.update(_u64(width) + buffers[1][slot * width : (slot + 1) * width])
    elif pat.is_binary_view(data_type) or pat.is_string_view(data_type):
        value = _view_value(buffers, slot)
        hasher.update(_u64(len(value)) + value)
    elif pat.is_binary(data_type) or pat.is_string(data_type):
        start, end = struct.unpack_from("<ii", buffers[1], slot * 4)
        hasher.update(_u64(end - start) + buffers[2][start:end])
    elif pat.is_large_binary(data_type) or pat.is_large_string(data_type):
        start, end = struct.unpack_from("<qq", buffers[1], slot * 8)
        hasher.update(_u64(end - start) + buffers[2][start:end])
    elif pat.is_fixed_size_list(data_type):
        size = data_type.list_size
        hasher.update(_u64(size))
        update_array(hasher, array.values.slice(slot * size, size), None)
    elif pat.is_list(data_type) or pat.is_large_list(data_type):
        form = "<ii" if pat.is_list(data_type) else "<qq"
        width = struct.calcsize(form) // 2
        start, end = struct.unpack_from(form, buffers[1], slot * width)
        hasher.update(_u64(end - start))
        update_array(hasher, array.values.slice(start, end - start), None)
    else:
        width = data_type.bit_width // 8
        hasher.update(buffers[1][slot * width : (slot + 1) * width])


def _view_value(buffers: list[bytes], slot: int) -> bytes:
    """A binary view's bytes: inline up to 12 bytes, else in the data buffer it names."""
    view = buffers[1][slot * 16 : (slot + 1) * 16]
    (length,) = struct.unpack_from("<i", view, 0)
    if length <= 12:
        return view[4 : 4 + length]
    index, offset = struct.unpack_from("<ii", view, 8)
    return buffers[2 + index][offset : offset + length]
