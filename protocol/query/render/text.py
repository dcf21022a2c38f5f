"""Building columns of JSON texts with numpy and Arrow compute, without a Python loop per value.

Every renderer returns a ``pa.LargeStringArray`` with one JSON text per row (``null`` rows hold
the text ``null``), so rows and containers can be assembled with Arrow's element-wise joins and
their bytes taken straight from the array's data buffer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TEXT = pa.large_string()
NULL = "null"


_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
"""What serde_json escapes in a string: quotes, backslashes and control characters."""
_NEEDS_ASCII_ESCAPE = r"[^\x20-\x21\x23-\x5b\x5d-\x7e]"
"""What canonical JSON escapes besides: everything outside printable ASCII too."""


def constant(text: str, length: int) -> pa.LargeStringArray:
    """``length`` copies of ``text`` (a null type column, an all-null column)."""
    encoded = text.encode()
    data = np.frombuffer(encoded * length, dtype=np.uint8) if length else np.empty(0, np.uint8)
    offsets = np.arange(length + 1, dtype=np.int64) * len(encoded)
    return _from_buffers(length, offsets, data)


def from_matrix(matrix: np.ndarray, lengths: np.ndarray) -> pa.LargeStringArray:
    """Row ``i`` is ``matrix[i, :lengths[i]]`` (ASCII bytes): fixed-layout texts built by column
    arithmetic become an Arrow array with one copy."""
    rows, width = matrix.shape
    lengths = lengths.astype(np.int64, copy=False)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keep = np.arange(width, dtype=np.int64)[None, :] < lengths[:, None]
    return _from_buffers(rows, offsets, matrix[keep])


def _from_buffers(rows: int, offsets: np.ndarray, data: np.ndarray) -> pa.LargeStringArray:
    array = pa.Array.from_buffers(
        TEXT, rows, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )
    assert isinstance(array, pa.LargeStringArray)
    return array


def digit_count(value: np.ndarray) -> np.ndarray:
    """Decimal digits of each non-negative integer (0 has one)."""
    powers = np.array([10**i for i in range(1, 20)], dtype=np.uint64)
    return np.searchsorted(powers, value.astype(np.uint64), side="right") + 1


def with_nulls(texts: pa.Array, valid: pa.Array | None) -> pa.LargeStringArray:
    """``texts`` where ``valid`` holds, the text ``null`` elsewhere (and where ``texts`` is null)."""
    if valid is not None:
        texts = pc.if_else(valid, texts, pa.scalar(NULL, TEXT))
    result = pc.fill_null(texts, pa.scalar(NULL, TEXT)) if texts.null_count else texts
    return _as_text(result)


def validity(array: pa.Array) -> pa.Array | None:
    """The array's own validity as a boolean array, ``None`` when nothing is null."""
    if array.null_count == 0:
        return None
    return pc.is_valid(array)


def quoted(texts: pa.Array) -> pa.LargeStringArray:
    """``"text"`` for texts known to need no escaping (hex digits, dates, decimals)."""
    return join(['"', texts, '"'])


def string_pieces(strings: pa.Array, *, ascii_only: bool) -> list[Piece]:
    """``json_strings`` as pieces of a row join: the strings between quotes when none needs
    escaping."""
    strings = _as_text(strings.cast(TEXT) if strings.type != TEXT else strings)
    if strings.null_count or _may_need_escapes(strings, ascii_only=ascii_only):
        return [json_strings(strings, ascii_only=ascii_only)]
    return ['"', strings, '"']


def _may_need_escapes(strings: pa.LargeStringArray, *, ascii_only: bool) -> bool:
    """Whether any byte of the strings' data is one a JSON string literal escapes (for
    ``ascii_only``, any byte outside printable ASCII): one pass over the bytes, where a regular
    expression match per string costs several times more. (Bytes under null slots count too.)"""
    data = np.frombuffer(data_bytes(strings), dtype=np.uint8)
    if ascii_only:
        return bool(((data - np.uint8(0x20)) > np.uint8(0x5E)).any() or _any_quote(data))
    return bool((data < 0x20).any() or _any_quote(data))


def _any_quote(data: np.ndarray) -> bool:
    return bool((data == ord('"')).any() or (data == ord("\\")).any())


def json_strings(strings: pa.Array, *, ascii_only: bool) -> pa.LargeStringArray:
    """Each string as a JSON string literal, escaped as serde_json (``ascii_only=False``) or
    canonical JSON (``ascii_only=True``) escapes it; nulls stay null."""
    strings = _as_text(strings.cast(TEXT) if strings.type != TEXT else strings)
    result = quoted(strings)
    if not _may_need_escapes(strings, ascii_only=ascii_only):
        return result
    pattern = _NEEDS_ASCII_ESCAPE if ascii_only else _NEEDS_ESCAPE
    needs = pc.fill_null(pc.match_substring_regex(strings, pattern), False)
    if pc.any(needs).as_py():
        escaped = [
            json.dumps(value, ensure_ascii=ascii_only)
            for value in strings.filter(needs).to_pylist()
        ]
        result = pc.replace_with_mask(result, needs, pa.array(escaped, TEXT))
    return _as_text(result)


@dataclass(frozen=True, slots=True)
class Indexed:
    """A column of few distinct texts, row ``i`` being ``table[index[i]]`` (dates, times of
    day): ``join`` picks its rows straight from the table, never taking the column out first.
    It has no nulls. ``width``: the byte length of every text of the table, when they are all
    as long (times of day) and the table is large: its rows are then picked by numpy.
    """

    table: pa.LargeStringArray
    index: np.ndarray
    width: int | None = None


Piece: TypeAlias = pa.Array | Indexed | str
"""A part of each row of a ``join``: a text column, an indexed table of texts or a constant."""


def merged_constants(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` with adjacent constant texts as one (fewer pieces for ``join`` to lay out)."""
    merged: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def join(pieces: list[Piece]) -> pa.LargeStringArray:
    """Row-wise concatenation of text columns and constant texts (a row with a null piece is
    null).

    The columns, the tables of indexed pieces and the constants are laid end to end in one
    array, and ``take`` picks its elements row by row, piece by piece: the taken array's data
    is the joined rows' bytes, and every ``len(pieces)``-th of its offsets bounds a row. Two
    copies per byte, where Arrow's ``binary_join_element_wise`` was most of the time of
    rendering a large answer. Small tables absorb their neighbours first (``_folded``)."""
    pieces = [_compact(piece) if isinstance(piece, Indexed) else piece for piece in pieces]
    sized = [piece for piece in pieces if not isinstance(piece, str)]
    if not sized:
        raise ValueError("a row-wise join needs at least one column")
    first = sized[0]
    rows = len(first.index) if isinstance(first, Indexed) else len(first)
    pieces = _folded(pieces, rows)
    columns = [_as_text(piece) for piece in pieces if isinstance(piece, pa.Array)]
    tables = [piece for piece in pieces if isinstance(piece, Indexed)]
    if any(len(column) != rows for column in columns):
        raise ValueError("the columns of a row-wise join differ in length")
    constants = [piece for piece in pieces if isinstance(piece, str)]
    laid = pa.concat_arrays(
        [*columns, *(table.table for table in tables), pa.array(constants, TEXT)]
    )
    # row r takes column piece c's element base[c] + r, a constant's element base[c] always,
    # an indexed piece's element base[c] + index[r] (its column of the matrix is redone)
    base = np.empty(len(pieces), dtype=np.int64)
    step = np.zeros(len(pieces), dtype=np.int64)
    column_base = 0
    table_base = rows * len(columns)
    constant_base = table_base + sum(len(table.table) for table in tables)
    for position, piece in enumerate(pieces):
        if isinstance(piece, str):
            base[position] = constant_base
            constant_base += 1
        elif isinstance(piece, Indexed):
            base[position] = table_base
            table_base += len(piece.table)
        else:
            base[position] = column_base
            step[position] = 1
            column_base += rows
    kind = np.int32 if constant_base < 2**31 else np.int64
    index = np.multiply.outer(np.arange(rows, dtype=kind), step.astype(kind))
    index += base.astype(kind)
    for position, piece in enumerate(pieces):
        if isinstance(piece, Indexed):
            index[:, position] = piece.index + base[position]
    valid: np.ndarray | None = None
    for column in columns:
        if column.null_count:
            mask = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            valid = mask if valid is None else valid & mask
    # in bounds by construction (columns as long as the rows, tables' indices checked by
    # _compact): Arrow's check of each index would cost ~5%
    taken = _as_text(pc.take(laid, pa.array(index.reshape(-1)), boundscheck=False))
    offsets = np.frombuffer(
        taken.buffers()[1], dtype=np.int64, count=len(taken) + 1, offset=taken.offset * 8
    )[:: len(pieces)]
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(
        TEXT, rows, [bitmap, pa.py_buffer(np.ascontiguousarray(offsets)), taken.buffers()[2]]
    )
    assert isinstance(array, pa.LargeStringArray)
    return array


_SMALL_TABLE = 4
"""A table is folded with its neighbours when the rows outnumber its texts this many times."""


def _folded(pieces: list[Piece], rows: int) -> list[Piece]:
    """``pieces`` with the constants next to a small indexed table written into each of its
    texts, and two adjacent small tables made one of their pairs (a timestamp's
    ``","system_time":"``, date, ``T``, time and ``Z"}`` of one day and second become one
    text): each row's join then takes fewer, longer elements, for work on tables a fraction of
    the rows' size."""

    def small(piece: Piece, more: int = 1) -> bool:
        return isinstance(piece, Indexed) and len(piece.table) * more * _SMALL_TABLE <= rows

    folded: list[Piece] = []
    for piece in pieces:
        last = folded[-1] if folded else None
        if isinstance(piece, str) and isinstance(last, Indexed) and small(last):
            folded[-1] = Indexed(join([last.table, piece]), last.index)
        elif isinstance(piece, Indexed) and small(piece) and isinstance(last, str):
            folded[-1] = Indexed(join([last, piece.table]), piece.index)
        elif (
            isinstance(piece, Indexed)
            and isinstance(last, Indexed)
            and small(last, len(piece.table))
        ):
            width = len(piece.table)
            pairs = np.arange(len(last.table) * width, dtype=np.int64)
            table = join([Indexed(last.table, pairs // width), Indexed(piece.table, pairs % width)])
            folded[-1] = Indexed(table, last.index.astype(np.int64) * width + piece.index)
        else:
            folded.append(piece)
    return folded


def integer_texts(
    values: np.ndarray, texts: Callable[[pa.Array], pa.Array] = lambda array: array
) -> Piece:
    """``texts`` of the decimal texts of integers, as a row join's piece: a table of the texts
    of their range, indexed, when that range is small beside their count (an ``op`` column,
    a price's whole part or cents), which ``join`` folds with its neighbours; else Arrow's
    cast of each value."""
    if len(values) >= _SMALL_TABLE:
        low, high = int(values.min()), int(values.max())
        if (high - low + 1) * _SMALL_TABLE <= len(values):
            table = pa.array(np.arange(low, high + 1, dtype=values.dtype)).cast(TEXT)
            if values.dtype.kind == "u":  # at least low: no wrap-around
                index = (values - values.dtype.type(low)).astype(np.int64)
            else:
                index = values.astype(np.int64) - low
            return Indexed(_as_text(texts(table)), index)
    return _as_text(texts(pa.array(values).cast(TEXT)))


def _compact(piece: Indexed) -> Indexed | pa.Array:
    """The part of the table the rows use; taken out as a column when that is still longer
    than the rows (laying the table would copy more than taking its rows). Raises
    ``IndexError`` for an index outside the table: ``join`` takes without Arrow's check."""
    rows = len(piece.index)
    if rows == 0:
        return piece.table.slice(0, 0)
    low, high = int(piece.index.min()), int(piece.index.max())
    if low < 0 or high >= len(piece.table):
        raise IndexError(f"indices {low}..{high} outside a table of {len(piece.table)} texts")
    if high - low + 1 > rows:
        if piece.width:
            return _fixed_width_take(piece.table, piece.index, piece.width)
        return piece.table.take(pa.array(piece.index))
    if low == 0 and high == len(piece.table) - 1:
        return piece
    return Indexed(piece.table.slice(low, high - low + 1), piece.index - low, piece.width)


def _fixed_width_take(table: pa.LargeStringArray, index: np.ndarray, width: int) -> pa.Array:
    """``table.take(index)`` for texts all ``width`` bytes long: each row's bytes copied as one
    opaque numpy value, several times faster than Arrow's take of variable-length texts."""
    values = np.frombuffer(data_bytes(table), dtype=f"V{width}")[index]
    offsets = np.arange(len(index) + 1, dtype=np.int64) * width
    return _from_buffers(len(index), offsets, values.view(np.uint8))


def map_values(
    array: pa.Array, render: Callable[[object], str], valid: pa.Array | None = None
) -> pa.LargeStringArray:
    """A per-value Python fallback for rare types and rare values."""
    texts = [NULL if value is None else render(value) for value in array.to_pylist()]
    return with_nulls(pa.array(texts, TEXT), valid)


def data_bytes(texts: pa.Array) -> memoryview:
    """The concatenated bytes of all rows of a text column (zero-copy)."""
    texts = _as_text(texts)
    offsets = np.frombuffer(
        texts.buffers()[1], dtype=np.int64, count=len(texts) + 1, offset=texts.offset * 8
    )
    start, end = int(offsets[0]), int(offsets[-1])
    data = texts.buffers()[2]
    if data is None or end == start:
        return memoryview(b"")
    return memoryview(data)[start:end]


def _as_text(array: pa.Array | pa.ChunkedArray) -> pa.LargeStringArray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != TEXT:
        array = array.cast(TEXT)
    assert isinstance(array, pa.LargeStringArray)
    return array
