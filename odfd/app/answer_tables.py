"""A query API answer's rows (``JsonAoS``) as an Arrow table of the types its ``OdfJson`` schema
declares, so ``odfd sql --remote`` writes what ``odfd sql`` here would: timestamps (their zone
kept), dates and decimals are text in JSON and are read back as what they were; ``int32`` stays
``int32``, struct fields keep their order (JSON objects come with sorted keys).

Values JSON carries as text that Arrow cannot parse back exactly (times of day, durations,
intervals, binaries in hex) stay text, as the answer gave them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from protocol.arrow_schema import schema_to_arrow
from protocol.codec.tree import from_tree
from protocol.errors import OdfError


def answer_table(output: dict[str, Any]) -> pa.Table:
    """The rows of ``output`` (an answer's ``{"data", "schema"}``) typed by its schema; by the
    rows' own keys and values when it has none or one this node cannot read."""
    rows: list[dict[str, Any]] = output.get("data") or []
    schema = _schema(output.get("schema"))
    if schema is None:
        names = list(rows[0]) if rows else []
        return pa.table({name: [row.get(name) for row in rows] for name in names})
    columns = [_column([row.get(field.name) for row in rows], field.type) for field in schema]
    fields = [field.with_type(column.type) for field, column in zip(schema, columns, strict=True)]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _schema(value: Any) -> pa.Schema | None:
    if not isinstance(value, dict):
        return None
    try:
        return schema_to_arrow(from_tree(value, "DataSchema"))
    except (OdfError, ValueError, TypeError, KeyError):
        return None


def _column(values: list[Any], kind: pa.DataType) -> pa.Array:
    """The values as JSON has them (text where ``_wire`` says), then cast to what they were."""
    wire = pa.array(values, type=_wire(kind))
    try:
        return wire.cast(_kept(kind))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return wire  # the answer's own text: never lose a value to a failed parse


def _parsed(kind: pa.DataType) -> bool:
    """Types JSON writes as text that Arrow's cast reads back exactly."""
    return pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_decimal(kind)


def _textual(kind: pa.DataType) -> bool:
    return _parsed(kind) or any(
        test(kind)
        for test in (
            pa.types.is_time,
            pa.types.is_duration,
            pa.types.is_interval,
            pa.types.is_binary,
            pa.types.is_large_binary,
            pa.types.is_fixed_size_binary,
        )
    )


def _wire(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every leaf JSON writes as text made a string."""
    return _nested(kind, lambda leaf: pa.string() if _textual(leaf) else leaf)


def _kept(kind: pa.DataType) -> pa.DataType:
    """``kind`` with the textual leaves Arrow cannot parse back left strings."""
    return _nested(kind, lambda leaf: pa.string() if _textual(leaf) and not _parsed(leaf) else leaf)


def _nested(kind: pa.DataType, leaf: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_field.with_type(_nested(kind.value_type, leaf))
        return pa.list_(item) if pa.types.is_list(kind) else pa.large_list(item)
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_nested(field.type, leaf)) for field in kind])
    return leaf(kind)
