"""One Arrow column as one JSON text per row, as the reference's data writers write values.

- Integers and booleans as JSON numbers and literals; floats per ``render.floats`` (NaN and
  infinities are ``null``); decimals as strings of their exact value (``"-0.05"``).
- Strings escaped as serde_json escapes them; binary values as lower-case hex strings.
- Dates, times, timestamps, durations and intervals as strings (``render.temporal``).
- Lists as arrays; structs as objects (keys sorted, a repeated name keeps its last value, as the
  reference's ``/query`` answer has them once read into a JSON value; with
  ``Style.schema_order``, every field in its order, as its record writers write ``/tail``'s) or,
  in JsonAoA, as arrays of their fields in order.
- Dictionary and run-end encoded columns as their values. Maps, which the reference cannot
  write, as objects keyed by their keys' texts. Unions are refused.

``Style.canonical`` selects the texts canonical JSON needs for hashing instead (floats as Rust
``{:e}``, strings ASCII-only); every other value is the same in both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from protocol.query.arrow_types import is_list
from protocol.query.errors import RenderError
from protocol.query.render.floats import float_pieces, render_floats
from protocol.query.render.temporal import render_temporal, timestamp_pieces
from protocol.query.render.text import (
    NULL,
    TEXT,
    Piece,
    constant,
    integer_texts,
    join,
    json_strings,
    quoted,
    string_pieces,
    validity,
    with_nulls,
)

_HEX = np.array([list(f"{byte:02x}".encode()) for byte in range(256)], dtype=np.uint8)


@dataclass(frozen=True, slots=True)
class Style:
    """How values are written: ``canonical`` texts for hashing; ``struct_arrays`` writes
    structs as arrays of their fields (JsonAoA) instead of objects; ``schema_order`` writes an
    object's keys in field order (the reference's ``/tail``) instead of sorted (its
    ``/query``)."""

    canonical: bool = False
    struct_arrays: bool = False
    schema_order: bool = False


def render_column(array: pa.Array, style: Style) -> pa.LargeStringArray:
    """The JSON text of every row of ``array`` (``null`` for nulls)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if len(array) == 0:
        return pa.array([], TEXT)
    if pa.types.is_null(kind):
        return constant(NULL, len(array))
    if isinstance(kind, pa.ExtensionType):
        return render_column(array.storage, style)
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        return with_nulls(array.cast(TEXT), None)
    if pa.types.is_floating(kind):
        return render_floats(array, canonical=style.canonical)
    if pa.types.is_decimal(kind):
        return _decimals(array)
    if _is_string(kind):
        return with_nulls(json_strings(array, ascii_only=style.canonical), None)
    if _is_binary(kind):
        return _hex(array)
    if pa.types.is_temporal(kind) or pa.types.is_interval(kind):
        return render_temporal(array)
    if pa.types.is_dictionary(kind):
        return render_column(array.dictionary_decode(), style)
    if pa.types.is_run_end_encoded(kind):
        return render_column(pc.run_end_decode(array), style)
    if pa.types.is_map(kind):
        return _maps(array, style)
    if is_list(kind):
        return _lists(array, style)
    if pa.types.is_struct(kind):
        return _structs(array, style)
    raise RenderError(f"a column of type {kind} cannot be written as JSON")


def column_pieces(array: pa.Array, style: Style) -> list[Piece]:
    """The texts of ``render_column`` as pieces of a row join: timestamps, strings, floats and
    integers without nulls (the bulk of most answers) are left in parts (quotes, tables of dates,
    times of day and small-range integers) that the row join copies once, instead of being
    joined into a column first."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if len(array) and array.null_count == 0:
        if pa.types.is_timestamp(kind):
            return timestamp_pieces(array, kind.unit, kind.tz)
        if _is_string(kind):
            return string_pieces(array, ascii_only=style.canonical)
        if pa.types.is_floating(kind):
            return float_pieces(array, canonical=style.canonical)
        if pa.types.is_integer(kind):
            return [integer_texts(np.asarray(array.to_numpy(zero_copy_only=False)))]
    return [render_column(array, style)]


def differs_by_style(kind: pa.DataType) -> bool:
    """Whether a column of this type can have different wire and canonical texts (floats and
    strings); every other column is rendered once for both."""
    if isinstance(kind, pa.ExtensionType):
        return differs_by_style(kind.storage_type)
    if pa.types.is_floating(kind) or _is_string(kind) or pa.types.is_map(kind):
        return True
    if pa.types.is_dictionary(kind):
        return differs_by_style(kind.value_type)
    if pa.types.is_run_end_encoded(kind):
        return differs_by_style(kind.value_type)
    if is_list(kind):
        return differs_by_style(kind.value_type)
    if pa.types.is_struct(kind):
        fields = [kind.field(index) for index in range(kind.num_fields)]
        return any(not field.name.isascii() or differs_by_style(field.type) for field in fields)
    return False


def object_key(name: str, style: Style) -> str:
    """A field name as an object key (with its colon)."""
    return json.dumps(name, ensure_ascii=style.canonical) + ":"


def object_layout(names: list[str], style: Style) -> list[int]:
    """Which fields an object keeps, in key order: sorted names, the last of equal names; with
    ``style.schema_order``, every field in order (as the reference's record writers write
    rows, straight from the batch)."""
    if style.schema_order:
        return list(range(len(names)))
    last = {name: index for index, name in enumerate(names)}
    return [last[name] for name in sorted(last)]


def _is_string(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or kind == pa.string_view()
    )


def _is_binary(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
        or kind == pa.binary_view()
    )


def _decimals(array: pa.Array) -> pa.LargeStringArray:
    """arrow-rs's text: the exact value with ``scale`` decimals (a negative scale appends
    zeros). Arrow C++'s cast gives the same text except in scientific notation and for values
    with more digits than the precision, which arrow-rs cuts to the precision; those are redone
    from the stored integers."""
    kind = array.type
    texts = array.cast(pa.string())
    digits = pc.subtract(
        pc.utf8_length(texts),
        pc.add(
            pc.cast(pc.starts_with(texts, "-"), pa.int32()),
            pc.cast(pc.match_substring(texts, "."), pa.int32()),
        ),
    )
    odd = pc.fill_null(
        pc.or_(pc.match_substring(texts, "E"), pc.greater(digits, kind.precision)), False
    )
    if pc.any(odd).as_py():
        rows = np.flatnonzero(np.asarray(odd.to_numpy(zero_copy_only=False), dtype=bool))
        redone = [
            decimal_text(_unscaled(array, int(row)), kind.precision, kind.scale) for row in rows
        ]
        texts = pc.replace_with_mask(texts, odd, pa.array(redone, pa.string()))
    return with_nulls(quoted(texts), validity(array))


def _unscaled(array: pa.Array, row: int) -> int:
    width = array.type.byte_width
    start = (array.offset + row) * width
    data = array.buffers()[1].to_pybytes()[start : start + width]
    return int.from_bytes(data, "little", signed=True)


def decimal_text(unscaled: int, precision: int, scale: int) -> str:
    """arrow-rs's ``format_decimal_str``: the digits (cut to ``precision``) with the point
    ``scale`` places from the right, or ``|scale|`` zeros appended."""
    text = str(unscaled)
    sign = "-" if text.startswith("-") else ""
    rest = text[len(sign) :]
    text = text[: min(precision, len(rest)) + len(sign)]
    if scale == 0:
        return text
    if scale < 0:
        return text + "0" * -scale
    if len(rest) > scale:
        return f"{text[: len(text) - scale]}.{text[len(text) - scale :]}"
    return f"{sign}0.{rest.rjust(scale, '0')}"


def _hex(array: pa.Array) -> pa.LargeStringArray:
    """Binary values as lower-case hex strings."""
    kind = array.type
    rows = len(array)
    if pa.types.is_fixed_size_binary(kind):
        width = kind.byte_width
        data = np.frombuffer(array.buffers()[1], dtype=np.uint8)
        start = array.offset * width
        raw = data[start : start + rows * width]
        offsets = np.arange(rows + 1, dtype=np.int64) * width
    else:
        if kind == pa.binary_view():
            array = array.cast(pa.large_binary())
            kind = array.type
        wide = pa.types.is_large_binary(kind)
        offsets = np.frombuffer(
            array.buffers()[1],
            dtype=np.int64 if wide else np.int32,
            count=rows + 1,
            offset=array.offset * (8 if wide else 4),
        ).astype(np.int64)
        buffer = array.buffers()[2]
        data = (
            np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.empty(0, np.uint8)
        )
        raw = data[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
    digits = _HEX[raw].reshape(-1)
    hexed = pa.Array.from_buffers(
        TEXT, rows, [None, pa.py_buffer(offsets * 2), pa.py_buffer(np.ascontiguousarray(digits))]
    )
    return with_nulls(quoted(hexed), validity(array))


def _lists(array: pa.Array, style: Style) -> pa.LargeStringArray:
    kind = array.type
    rows = len(array)
    if pa.types.is_list_view(kind) or pa.types.is_large_list_view(kind):
        array = array.cast(pa.large_list(kind.value_field))
        kind = array.type
    if pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        child = array.values.slice(array.offset * size, rows * size)
        offsets = np.arange(rows + 1, dtype=np.int64) * size
    else:
        offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        child = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        offsets = offsets - offsets[0]
    items = render_column(child, style)
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), items)
    return with_nulls(
        join(["[", pc.binary_join(lists, pa.scalar(",", TEXT)), "]"]), validity(array)
    )


def _structs(array: pa.Array, style: Style) -> pa.LargeStringArray:
    kind = array.type
    names = [kind.field(index).name for index in range(kind.num_fields)]
    children = array.flatten()
    if style.struct_arrays:
        order = list(range(len(names)))
        keys = ["" for _ in order]
        opening, closing = "[", "]"
    else:
        order = object_layout(names, style)
        keys = [object_key(names[index], style) for index in order]
        opening, closing = "{", "}"
    if not order:
        return with_nulls(constant(opening + closing, len(array)), validity(array))
    pieces: list[pa.Array | str] = []
    for position, index in enumerate(order):
        pieces.append(("," if position else opening) + keys[position])
        pieces.append(render_column(children[index], style))
    pieces.append(closing)
    return with_nulls(join(pieces), validity(array))


def _maps(array: pa.Array, style: Style) -> pa.LargeStringArray:
    """Maps as objects: each key's text (a string's own text, else its JSON text as a string),
    keys sorted, the last of equal keys kept."""
    offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    keys = render_column(array.keys.slice(start, end - start), style).to_pylist()
    items = render_column(array.items.slice(start, end - start), style).to_pylist()
    valid = array.is_valid().to_pylist()
    texts = []
    for row in range(len(array)):
        if not valid[row]:
            texts.append(NULL)
            continue
        entries: dict[str, str] = {}
        for entry in range(int(offsets[row] - start), int(offsets[row + 1] - start)):
            key = keys[entry]
            name = json.loads(key) if key.startswith('"') else key
            entries[name] = items[entry]
        body = ",".join(object_key(name, style) + entries[name] for name in sorted(entries))
        texts.append("{" + body + "}")
    return pa.array(texts, TEXT)
