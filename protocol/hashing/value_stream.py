"""The bytes arrow-digest ``ArrayDigestV0`` feeds a leaf column's hasher, built a chunk at a time.

Every value contributes one *record*, in row order:

- a fixed-width value (integers, floats, decimals, dates, times, timestamps): its little-endian
  in-memory bytes;
- a boolean: one byte, 1 for false and 2 for true;
- a binary or string value: its length as u64, then its bytes (fixed-size binary the same);
- a list: its length as u64, then the records of its items (the items' own nulls apply);
- a null: a single zero byte, whatever the type.

Records are assembled for a whole chunk with NumPy and Arrow kernels, never a Python loop per
value, and without copies where the layout allows: fixed-width values without nulls are hashed
straight from the Arrow buffer; with nulls, one Arrow ``filter`` over the bytes keeps a whole
value where it is valid and the first (zeroed) byte where it is null. Strings of one length form
a byte matrix; other strings interleave a header array and a body array by one ``take``; a
dictionary column takes its values' records by index, one ``take`` of whole records (of matrix
rows, when they are all of one width). A list needs the boundaries of its items' records to cut
its bodies, so encoders return record offsets when asked for them.

Values under a null are read from the buffers exactly as arrow-digest reads them, because its
null-combining rule (see ``records_digest``) can make such a value count as valid.

Kernels are called through ``pyarrow._compute.call_function``, the function ``pyarrow.compute``
re-exports: importing ``pyarrow.compute`` (which array methods such as ``take`` do on first use)
generates its wrappers and their docstrings, 45 ms of CPU, a tenth of what ``odfd data hash`` of a
string column spends beyond SHA3.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.types as pat
from pyarrow._compute import TakeOptions, call_function

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
    bitmap = array.buffers()[0]
    if bitmap is None:  # a null-type or union array: no bitmap, yet nulls
        mask: np.ndarray = array.is_valid().to_numpy(zero_copy_only=False)
        return mask
    n, first = len(array), array.offset
    packed = np.frombuffer(bitmap, dtype=_U8, count=(first + n + 7) // 8)
    return np.unpackbits(packed, count=first + n, bitorder="little")[first:].view(np.bool_)


def is_binary_like(data_type: pa.DataType) -> bool:
    """Types whose values are byte strings of any length (their records are length-prefixed)."""
    return bool(
        pat.is_binary(data_type)
        or pat.is_string(data_type)
        or pat.is_large_binary(data_type)
        or pat.is_large_string(data_type)
        or pat.is_binary_view(data_type)
        or pat.is_string_view(data_type)
    )


def encode(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """The records of ``array``'s values; ``valid`` (``None``: all valid) decides which are null.

    ``array`` must have a type :func:`protocol.hashing.data_types.encode_data_type` accepts, or
    be a dictionary array of binary-like values (see :func:`dictionary_encodable`).
    """
    data_type = array.type
    n = len(array)
    if n == 0:
        return Records(np.empty(0, _U8), np.zeros(1, np.int64) if with_offsets else None)
    if pat.is_dictionary(data_type):
        return _dictionary_records(array, valid, with_offsets)
    if pat.is_boolean(data_type):
        return _boolean_records(array, valid, with_offsets)
    if pat.is_fixed_size_binary(data_type):
        width = data_type.byte_width
        return _fixed_records(_prefixed_matrix(_value_matrix(array, width)), valid, with_offsets)
    if is_binary_like(data_type):
        return _binary_records(array, valid, with_offsets)
    if pat.is_list(data_type) or pat.is_large_list(data_type) or pat.is_fixed_size_list(data_type):
        return _list_records(array, valid, with_offsets)
    return _fixed_records(_value_matrix(array, data_type.bit_width // 8), valid, with_offsets)


def dictionary_encodable(array: pa.Array) -> bool:
    """Whether ``array`` is a dictionary that :func:`encode` hashes as its decoded values
    without decoding them: binary-like values, none of them null."""
    return (
        pat.is_dictionary(array.type)
        and is_binary_like(array.type.value_type)
        and array.dictionary.null_count == 0
    )


def _value_matrix(array: pa.Array, width: int) -> np.ndarray:
    """The values buffer of a fixed-width array as an ``(n, width)`` byte matrix, zero-copy."""
    n = len(array)
    return np.frombuffer(
        array.buffers()[1], dtype=_U8, count=n * width, offset=array.offset * width
    ).reshape(n, width)


def _prefixed_matrix(values: np.ndarray) -> np.ndarray:
    """Rows of equal-length byte strings, each preceded by its length as u64."""
    n, width = values.shape
    matrix = np.empty((n, _LENGTH_SIZE + width), dtype=_U8)
    matrix[:, :_LENGTH_SIZE] = np.array([width], _LE_U64).view(_U8)
    matrix[:, _LENGTH_SIZE:] = values
    return matrix


def _fixed_records(matrix: np.ndarray, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """Records of equal width (one matrix row each); a null row shrinks to one zero byte."""
    n, width = matrix.shape
    if valid is None:
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64) if with_offsets else None
        return Records(np.ascontiguousarray(matrix).reshape(-1), offsets)
    values = np.array(matrix, dtype=_U8, order="C")
    values[:, 0] *= valid  # a null row's first byte becomes its null marker
    if width == _NULL_MARKER_SIZE:
        data: np.ndarray | memoryview = values.reshape(-1)
    else:
        data = _filter_bytes(values.reshape(-1), _kept_bytes(valid, width))
    offsets = None
    if with_offsets:
        offsets = _cumulative(np.where(valid, width, _NULL_MARKER_SIZE))
    return Records(data, offsets)


def _kept_bytes(valid: np.ndarray, width: int) -> np.ndarray:
    """A bitmap (LSB first) over the bytes of ``n`` rows of ``width``: a valid row's bytes are
    all kept, a null row's first byte only."""
    if width % 8 == 0:
        # Each row covers whole bitmap bytes: 0xff.. for a valid row, 0x01 0x00.. for a null one.
        kept = np.zeros(width // 8, _U8)
        kept[0] = 1
        return np.where(valid[:, None], np.uint8(0xFF), kept).reshape(-1)
    keep = np.empty((len(valid), width), dtype=np.bool_)
    keep[:, 0] = True
    keep[:, 1:] = valid[:, None]
    return np.packbits(keep.reshape(-1), bitorder="little")


def _filter_bytes(data: np.ndarray, kept: np.ndarray) -> memoryview:
    """The bytes of ``data`` whose bit in ``kept`` is set, in order (one Arrow kernel)."""
    n = len(data)
    values = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(data)])
    selection = pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(kept)])
    result = call_function("filter", [values, selection])
    return memoryview(result.buffers()[1])[result.offset : result.offset + len(result)]


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
        data *= valid
    offsets = np.arange(n + 1, dtype=np.int64) if with_offsets else None
    return Records(data, offsets)


def _binary_records(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """Each value as its u64 length then its bytes."""
    value_offsets, data = _raw_values(array)
    n = len(array)
    lengths = np.diff(value_offsets)
    if lengths.min() == lengths.max():
        # All of one length (codes, identifiers, hashes): the records form a byte matrix.
        width = int(lengths[0])
        values = np.frombuffer(data, dtype=_U8, count=n * width).reshape(n, width)
        return _fixed_records(_prefixed_matrix(values), valid, with_offsets)
    bodies = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(value_offsets), data])
    return _length_prefixed(lengths, bodies, valid, with_offsets)


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
    )
    first, last = int(offsets[0]), int(offsets[-1])
    data = buffers[2].slice(first, last - first) if buffers[2] is not None else pa.py_buffer(b"")
    return np.subtract(offsets, first, dtype=np.int64), data


def _dictionary_records(array: pa.Array, valid: np.ndarray | None, with_offsets: bool) -> Records:
    """A dictionary array's records, taken whole from its encoded dictionary by index.

    Decoding would give an own-null slot an empty value, which the combining rule can make
    count (see ``records_digest``); such a slot takes an empty value's record here too.
    """
    dictionary = array.dictionary
    entries = encode(dictionary, None, with_offsets=True)
    entry_offsets = cast(np.ndarray, entries.offsets)
    own = validity_mask(array)
    if _uniform_records(entry_offsets, own, valid):
        return _uniform_dictionary_records(array, entries.data, entry_offsets, valid, with_offsets)
    end = int(entry_offsets[-1])
    empty, null = len(dictionary), len(dictionary) + 1
    records = pa.Array.from_buffers(
        pa.large_binary(),
        len(dictionary) + 2,
        [
            None,
            pa.py_buffer(
                np.concatenate([entry_offsets, [end + _LENGTH_SIZE, end + _LENGTH_SIZE + 1]])
            ),
            pa.py_buffer(np.concatenate([_bytes(entries.data), np.zeros(_LENGTH_SIZE + 1, _U8)])),
        ],
    )
    index_array = array.indices
    if own is None and valid is None:
        taken = call_function("take", [records, index_array])
    else:
        index_type = np.dtype(
            f"{'i' if pat.is_signed_integer(index_array.type) else 'u'}"
            f"{index_array.type.bit_width // 8}"
        )
        indices = np.frombuffer(
            index_array.buffers()[1],
            dtype=index_type,
            count=len(array),
            offset=index_array.offset * index_type.itemsize,
        ).astype(np.int64)
        if own is not None:
            indices = np.where(own, indices, empty)
        if valid is not None:
            indices = np.where(valid, indices, null)
        taken = call_function("take", [records, _indices(indices)])
    taken_offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64, count=len(array) + 1)
    data = memoryview(taken.buffers()[2])[taken_offsets[0] : taken_offsets[-1]]
    return Records(data, taken_offsets - taken_offsets[0] if with_offsets else None)


def _uniform_records(
    entry_offsets: np.ndarray, own: np.ndarray | None, valid: np.ndarray | None
) -> bool:
    """Whether a dictionary's records can be taken as rows of a byte matrix: its entries' records
    are of one width (values of one length: codes, identifiers), and no own-null slot counts as
    valid (it would take an empty value's shorter record)."""
    widths = np.diff(entry_offsets)
    if len(widths) == 0 or widths.min() != widths.max():
        return False
    return own is None or (valid is not None and not np.any(valid & ~own))


def _uniform_dictionary_records(
    array: pa.Array,
    entry_data: np.ndarray | memoryview,
    entry_offsets: np.ndarray,
    valid: np.ndarray | None,
    with_offsets: bool,
) -> Records:
    """Records of a dictionary array whose entries' records are of one width: one fixed-width
    ``take`` of matrix rows (a gather, a fifth of the cost of taking variable-length values)."""
    dictionary_size = len(entry_offsets) - 1
    width = int(entry_offsets[1] - entry_offsets[0])
    rows = pa.Array.from_buffers(
        pa.binary(width), dictionary_size, [None, pa.py_buffer(_bytes(entry_data))]
    )
    taken = call_function("take", [rows, array.indices])  # own-null slots: null rows
    return _fixed_records(_value_matrix(taken, width), valid, with_offsets)


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
    """Interleave ``u64 length`` headers with ``bodies`` (``large_binary``): one ``take`` from
    the headers, the bodies and two extra values, the null marker and an empty body.

    A null value's record is the null marker alone: its header and body are not taken.
    """
    n = len(bodies)
    headers = pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(_header_offsets(n)), pa.py_buffer(lengths.astype(_LE_U64))],
    )
    source = pa.concat_arrays([headers, bodies, _MARKERS])
    order = _interleaved(n)
    if valid is not None:
        # A null value takes the null marker (at 2n) for its header and the empty body (2n + 1).
        headers_of_nulls = 2 * np.flatnonzero(~valid)
        order = order.copy()
        order[headers_of_nulls] = 2 * n
        order[headers_of_nulls + 1] = 2 * n + 1
    joined = call_function("take", [source, _indices(order)], _UNCHECKED)
    joined_offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64, count=2 * n + 1)
    data = memoryview(joined.buffers()[2])[joined_offsets[0] : joined_offsets[-1]]
    return Records(data, joined_offsets[0::2] - joined_offsets[0] if with_offsets else None)


@functools.lru_cache(maxsize=4)
def _header_offsets(n: int) -> np.ndarray:
    """Offsets of ``n`` u64 headers in one buffer (the same for every block of ``n`` values)."""
    offsets = np.arange(0, (n + 1) * _LENGTH_SIZE, _LENGTH_SIZE, dtype=np.int64)
    offsets.flags.writeable = False
    return offsets


@functools.lru_cache(maxsize=4)
def _interleaved(n: int) -> np.ndarray:
    """``0, n, 1, n + 1, ...``: each value's header (at ``i``) then its body (at ``n + i``)."""
    order = np.arange(2 * n, dtype=np.int64).reshape(2, n).T.reshape(-1)
    order.flags.writeable = False
    return order


_UNCHECKED = TakeOptions(boundscheck=False)
"""For indices built here, in range by construction (a file's dictionary indices are checked)."""

_MARKERS = pa.Array.from_buffers(
    pa.large_binary(), 2, [None, pa.py_buffer(np.array([0, 1, 1], np.int64)), pa.py_buffer(b"\x00")]
)
"""The null marker and an empty body, taken in place of a null value's header and body (built
from buffers: ``pa.array`` of Python objects would import pandas)."""


def _indices(values: np.ndarray) -> pa.Array:
    """``values`` as an Arrow array, zero-copy (``pa.array`` would look for pandas first)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _bytes(data: np.ndarray | memoryview) -> np.ndarray:
    """Records' bytes as a NumPy byte array (Arrow buffers export signed chars), zero-copy."""
    return np.frombuffer(data, dtype=_U8)


def _cumulative(sizes: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets
