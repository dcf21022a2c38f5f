"""The bytes arrow-digest ``ArrayDigestV0`` feeds a leaf column's hasher, built a chunk at a time.

Every value contributes one *record*, in row order:

- a fixed-width value (integers, floats, decimals, dates, times, timestamps): its little-endian
  in-memory bytes;
- a boolean: one byte, 1 for false and 2 for true;
- a binary or string value: its length as u64, then its bytes (fixed-size binary the same);
- a list: its length as u64, then the records of its items (the items' own nulls apply);
- a null: a single zero byte, whatever the type.

Records are assembled for a whole chunk with NumPy and Arrow kernels, never a Python loop per
value: fixed-width records are a byte matrix compressed by a mask, and variable-length records are
a header array and a body array interleaved by one ``take``. A list needs the boundaries of its
items' records to cut its bodies, so encoders return record offsets when asked for them.

Values under a null are read from the buffers exactly as arrow-digest reads them, because its
null-combining rule (see ``records_digest``) can make such a value count as valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

_NULL_MARKER_SIZE = 1
_LENGTH_SIZE = 8

_U8 = np.dtype(np.uint8)
_LE_U64 = np.dtype("<u8")


@dataclass(frozen=True, slots=True)
class Records:
    """The records of ``n`` values: their bytes and, when requested, ``n + 1`` boundaries."""

    data: np.ndarray | memoryview
    offsets: np.ndarray | None


def validity_mask(array: pa.Array) -> np.ndarray | None:
    """The array's own validity as booleans, or ``None`` when it has no nulls."""
    if array.null_count == 0:
        return None
    mask: np.ndarray = array.is_valid().to_numpy(zero_copy_only=False)
    return mask


def encode(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """The records of ``array``'s values; ``valid`` (``None``: all valid) decides which are null.

    ``array`` must have a type :func:`protocol.hashing.data_types.encode_data_type` accepts.
    """
    data_type = array.type
    n = len(array)
    if n == 0:
        return Records(np.empty(0, _U8), np.zeros(1, np.int64) if with_offsets else None)
    if pat.is_boolean(data_type):
        return _boolean_records(array, valid, with_offsets)
    if pat.is_fixed_size_binary(data_type):
        width = data_type.byte_width
        values = _value_matrix(array, width)
        header = np.broadcast_to(np.array([width], _LE_U64).view(_U8), (n, _LENGTH_SIZE))
        return _fixed_records(np.hstack([header, values]), valid, with_offsets)
    if (
        pat.is_binary(data_type)
        or pat.is_string(data_type)
        or pat.is_large_binary(data_type)
        or pat.is_large_string(data_type)
        or pat.is_binary_view(data_type)
        or pat.is_string_view(data_type)
    ):
        return _binary_records(array, valid, with_offsets)
    if pat.is_list(data_type) or pat.is_large_list(data_type) or pat.is_fixed_size_list(data_type):
        return _list_records(array, valid, with_offsets)
    return _fixed_records(_value_matrix(array, data_type.bit_width // 8), valid, with_offsets)


def _value_matrix(array: pa.Array, width: int) -> np.ndarray:
    """The values buffer of a fixed-width array as an ``(n, width)`` byte matrix, zero-copy."""
    n = len(array)
    return np.frombuffer(
        array.buffers()[1], dtype=_U8, count=n * width, offset=array.offset * width
    ).reshape(n, width)


def _fixed_records(matrix: np.ndarray, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """Records of equal width (one matrix row each); a null row shrinks to one zero byte."""
    n, width = matrix.shape
    if valid is None:
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64) if with_offsets else None
        return Records(np.ascontiguousarray(matrix).reshape(-1), offsets)
    null = ~valid
    values = np.where(valid[:, None], matrix, np.uint8(0))
    if width > _NULL_MARKER_SIZE:
        keep = np.ones((n, width), dtype=bool)
        keep[null, _NULL_MARKER_SIZE:] = False
        data = values[keep]
    else:
        data = values.reshape(-1)
    offsets = None
    if with_offsets:
        sizes = np.where(valid, width, _NULL_MARKER_SIZE)
        offsets = _cumulative(sizes)
    return Records(data, offsets)


def _boolean_records(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    n = len(array)
    first_bit = array.offset
    packed = np.frombuffer(
        array.buffers()[1],
        dtype=_U8,
        count=(first_bit + n + 7) // 8 - first_bit // 8,
        offset=first_bit // 8,
    )
    start = first_bit % 8
    bits = np.unpackbits(packed, bitorder="little")[start : start + n]
    data = bits + np.uint8(1)
    if valid is not None:
        data = np.where(valid, data, np.uint8(0))
    offsets = np.arange(n + 1, dtype=np.int64) if with_offsets else None
    return Records(data, offsets)


def _binary_records(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """Each value as its u64 length then its bytes."""
    value_offsets, data = _raw_values(array)
    bodies = pa.Array.from_buffers(
        pa.large_binary(), len(array), [None, pa.py_buffer(value_offsets), data]
    )
    return _length_prefixed(np.diff(value_offsets), bodies, valid, with_offsets)


def _raw_values(array: pa.Array) -> tuple[np.ndarray, pa.Buffer]:
    """Every slot's bytes (nulls included, as arrow-digest reads them): offsets from 0, data."""
    n = len(array)
    data_type = array.type
    if pat.is_binary_view(data_type) or pat.is_string_view(data_type):
        buffers = array.buffers()
        raw_view = pa.Array.from_buffers(
            pa.binary_view(), n, [None, *buffers[1:]], offset=array.offset
        )
        array = raw_view.cast(pa.large_binary())
        data_type = array.type
    offset_type = (
        np.int64 if pat.is_large_binary(data_type) or pat.is_large_string(data_type) else np.int32
    )
    buffers = array.buffers()
    offsets = np.frombuffer(
        buffers[1],
        dtype=offset_type,
        count=n + 1,
        offset=array.offset * np.dtype(offset_type).itemsize,
    ).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    data = buffers[2].slice(first, last - first) if buffers[2] is not None else pa.py_buffer(b"")
    return offsets - first, data


def _list_records(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """Each list as its u64 length then its items' records (items' own nulls apply)."""
    n = len(array)
    if pat.is_fixed_size_list(array.type):
        size = array.type.list_size
        list_offsets = np.arange(0, (n + 1) * size, size, dtype=np.int64) + array.offset * size
    else:
        offset_type = np.int64 if pat.is_large_list(array.type) else np.int32
        list_offsets = np.frombuffer(
            array.buffers()[1],
            dtype=offset_type,
            count=n + 1,
            offset=array.offset * np.dtype(offset_type).itemsize,
        ).astype(np.int64)
    first = int(list_offsets[0])
    items = array.values.slice(first, int(list_offsets[-1]) - first)
    item_records = encode(items, validity_mask(items), with_offsets=True)
    body_offsets = cast(np.ndarray, item_records.offsets)[list_offsets - first]
    bodies = pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(body_offsets), pa.py_buffer(item_records.data)],
    )
    return _length_prefixed(np.diff(list_offsets), bodies, valid, with_offsets)


def _length_prefixed(
    lengths: np.ndarray, bodies: pa.Array, valid: np.ndarray | None, with_offsets: bool
) -> Records:
    """Interleave ``u64 length`` headers with ``bodies`` (``large_binary``, offset zero).

    A null value's record is its header alone, the one-byte null marker: its body is skipped.
    """
    n = len(bodies)
    length_matrix = lengths.astype(_LE_U64).view(_U8).reshape(n, _LENGTH_SIZE)
    headers = _fixed_records(length_matrix, valid, with_offsets=True)
    header_array = pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(cast(np.ndarray, headers.offsets)), pa.py_buffer(headers.data)],
    )
    if valid is not None:
        bodies = pa.Array.from_buffers(
            pa.large_binary(),
            n,
            [pa.py_buffer(np.packbits(valid, bitorder="little")), *bodies.buffers()[1:3]],
        )
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2] = np.arange(n, dtype=np.int64)
    order[1::2] = np.arange(n, 2 * n, dtype=np.int64)
    joined = pa.concat_arrays([header_array, bodies]).take(pa.array(order))
    joined_offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64, count=2 * n + 1)
    data = memoryview(joined.buffers()[2])[joined_offsets[0] : joined_offsets[-1]]
    return Records(data, joined_offsets[0::2] - joined_offsets[0] if with_offsets else None)


def _cumulative(sizes: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets
