"""Short columns of plain types rendered value by value.

The vectorized renderers cost a fixed few hundred microseconds per column whatever its length
(tens of Arrow kernel calls), which is most of the work of a small answer. For a column of a few
rows, the same texts are made faster one value at a time by the scalar rules the vectorized
paths follow (``protocol.query.floats``, ``json.dumps`` for escaped strings); tests check the two
paths agree on every value. Other types (decimals, temporal values, binary, nested values) always
take the vectorized path.
"""

from __future__ import annotations

import json
import math

import pyarrow as pa

from protocol.query.floats import NumberOutOfRange, canonical_text, reread, wire_text
from protocol.query.render.text import NULL

SMALL_ROWS = 64
"""Rows up to which a chunk is rendered value by value."""


def small_texts(array: pa.Array, *, canonical: bool) -> list[str] | None:
    """The JSON text of every value of a short column of a plain type (``null`` for nulls), as
    ``columns.render_column`` writes it; ``None`` for a type it leaves to that."""
    kind = array.type
    if pa.types.is_null(kind):
        return [NULL] * len(array)
    if pa.types.is_boolean(kind):
        return [NULL if value is None else "true" if value else "false" for value in _values(array)]
    if pa.types.is_integer(kind):
        return [NULL if value is None else str(value) for value in _values(array)]
    if pa.types.is_floating(kind):
        single = not pa.types.is_float64(kind)
        if pa.types.is_float16(kind):
            array = array.cast(pa.float32())
        return [_float(value, single, canonical) for value in _values(array)]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or kind == pa.string_view():
        return [
            NULL if value is None else json.dumps(value, ensure_ascii=canonical)
            for value in _values(array)
        ]
    return None


def _values(array: pa.Array) -> list[object]:
    return array.to_pylist()  # type: ignore[no-any-return]


def _float(value: object, single: bool, canonical: bool) -> str:
    """A value after the reference's write and re-read (one it cannot re-read stays as it is);
    ``null`` for nulls, NaN and infinities."""
    if value is None:
        return NULL
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        return NULL
    try:
        number = reread(number, single=single)
    except NumberOutOfRange:
        pass
    return canonical_text(number) if canonical else wire_text(number)
