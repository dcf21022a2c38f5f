"""The Parquet schema the reference would write a result with, in its two text forms.

The Arrow-to-Parquet mapping is arrow-rs's default (no type coercion): the root group is
``arrow_schema``; integers narrower than 32 bits and unsigned ones carry ``INTEGER(bits,signed)``;
timestamps ``TIMESTAMP(unit,adjusted)`` except in seconds; lists are three-level
``group (LIST) { repeated group list { item } }``; maps ``group (MAP) { repeated group entries
{ key; value } }``; decimals are INT32, INT64 or fixed-length bytes by precision.

``Parquet`` is parquet-rs's schema printer (``message arrow_schema { REQUIRED INT64 offset; …
}``); ``ParquetJson`` is the reference's own JSON rendering of the same tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from protocol.query.arrow_types import is_list
from protocol.query.errors import RenderError

_INDENT = 2
_UNITS = {"ms": "MILLIS", "us": "MICROS", "ns": "NANOS"}


@dataclass(frozen=True, slots=True)
class _Primitive:
    name: str
    repetition: str
    physical: str
    length: int = -1
    logical: str | None = None
    converted: str | None = None


@dataclass(frozen=True, slots=True)
class _Group:
    name: str
    repetition: str | None
    fields: tuple[_Primitive | _Group, ...]
    logical: str | None = None


def convert(schema: pa.Schema) -> _Group:
    """The Parquet schema tree of an Arrow schema."""
    return _Group("arrow_schema", None, tuple(_field(item) for item in schema))


def format_text(schema: pa.Schema) -> str:
    """parquet-rs's printout of the schema (with its final newline)."""
    lines: list[str] = []
    _print(convert(schema), 0, lines)
    return "".join(lines) + "\n"


def format_json(schema: pa.Schema) -> dict[str, Any]:
    """The reference's JSON form of the schema."""
    return _json(convert(schema))


def _field(arrow: pa.Field) -> _Primitive | _Group:
    name = arrow.name
    repetition = "OPTIONAL" if arrow.nullable else "REQUIRED"
    kind = arrow.type

    def primitive(physical: str, logical: str | None = None, length: int = -1) -> _Primitive:
        return _Primitive(name, repetition, physical, length, logical)

    if pa.types.is_dictionary(kind):
        return _field(pa.field(name, kind.value_type, arrow.nullable))
    if pa.types.is_null(kind):
        return primitive("INT32", "UNKNOWN")
    if pa.types.is_boolean(kind):
        return primitive("BOOLEAN")
    if pa.types.is_integer(kind):
        signed = pa.types.is_signed_integer(kind)
        bits = kind.bit_width
        physical = "INT64" if bits == 64 else "INT32"
        logical = None if signed and bits >= 32 else f"INTEGER({bits},{str(signed).lower()})"
        return primitive(physical, logical)
    if pa.types.is_float16(kind):
        return primitive("FIXED_LEN_BYTE_ARRAY", "FLOAT16", 2)
    if pa.types.is_float32(kind):
        return primitive("FLOAT")
    if pa.types.is_float64(kind):
        return primitive("DOUBLE")
    if pa.types.is_timestamp(kind):
        if kind.unit == "s":
            return primitive("INT64")
        adjusted = str(bool(kind.tz)).lower()
        return primitive("INT64", f"TIMESTAMP({_UNITS[kind.unit]},{adjusted})")
    if pa.types.is_date32(kind):
        return primitive("INT32", "DATE")
    if pa.types.is_date64(kind):
        return primitive("INT64")
    if pa.types.is_time32(kind):
        return primitive("INT32", None if kind.unit == "s" else "TIME(MILLIS,false)")
    if pa.types.is_time64(kind):
        return primitive("INT64", f"TIME({_UNITS[kind.unit]},false)")
    if pa.types.is_duration(kind):
        return primitive("INT64")
    if pa.types.is_interval(kind):
        return _Primitive(name, repetition, "FIXED_LEN_BYTE_ARRAY", 12, None, "INTERVAL")
    if pa.types.is_decimal(kind):
        return _decimal(name, repetition, kind.precision, kind.scale)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or kind == pa.string_view():
        return primitive("BYTE_ARRAY", "STRING")
    if pa.types.is_fixed_size_binary(kind):
        return primitive("FIXED_LEN_BYTE_ARRAY", None, kind.byte_width)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or kind == pa.binary_view():
        return primitive("BYTE_ARRAY")
    if is_list(kind):
        element = _field(kind.value_field)
        inner = _Group("list", "REPEATED", (element,))
        return _Group(name, repetition, (inner,), "LIST")
    if pa.types.is_map(kind):
        entries = _Group("entries", "REPEATED", (_field(kind.key_field), _field(kind.item_field)))
        return _Group(name, repetition, (entries,), "MAP")
    if pa.types.is_struct(kind):
        if kind.num_fields == 0:
            raise RenderError(f"column {name!r}: Parquet does not support empty structs")
        children = tuple(_field(kind.field(index)) for index in range(kind.num_fields))
        return _Group(name, repetition, children)
    raise RenderError(f"column {name!r} of type {kind} has no Parquet schema")


def _decimal(name: str, repetition: str, precision: int, scale: int) -> _Primitive:
    if 1 < precision <= 9:
        physical, length = "INT32", -1
    elif precision <= 18:
        physical, length = "INT64", -1
    else:
        physical = "FIXED_LEN_BYTE_ARRAY"
        length = math.ceil((math.log2(10.0**precision + 1.0) + 1.0) / 8.0)
    return _Primitive(name, repetition, physical, length, f"DECIMAL({precision},{scale})")


def _annotation(node: _Primitive | _Group) -> str:
    if node.logical is not None:
        return node.logical
    if isinstance(node, _Primitive) and node.converted is not None:
        return node.converted
    return ""


def _print(node: _Primitive | _Group, indent: int, lines: list[str]) -> None:
    lines.append(" " * indent)
    if isinstance(node, _Primitive):
        physical = node.physical
        if physical == "FIXED_LEN_BYTE_ARRAY":
            physical = f"{physical} ({node.length})"
        lines.append(f"{node.repetition} {physical} {node.name}")
        annotation = _annotation(node)
        lines.append(f" ({annotation});" if annotation else ";")
        return
    if node.repetition is None:
        lines.append(f"message {node.name} ")
    else:
        lines.append(f"{node.repetition} group {node.name} ")
        if node.logical:
            lines.append(f"({node.logical}) ")
    lines.append("{\n")
    for child in node.fields:
        _print(child, indent + _INDENT, lines)
        lines.append("\n")
    lines.append(" " * indent + "}")


def _json(node: _Primitive | _Group) -> dict[str, Any]:
    if isinstance(node, _Primitive):
        physical = node.physical
        if physical == "FIXED_LEN_BYTE_ARRAY":
            physical = f"{physical}({node.length})"
        value: dict[str, Any] = {"name": node.name, "repetition": node.repetition, "type": physical}
        annotation = _annotation(node)
        if annotation:
            value["logicalType"] = annotation
        return value
    group: dict[str, Any] = {"name": node.name, "type": "struct"}
    if node.repetition is not None:
        group["repetition"] = node.repetition
    group["fields"] = [_json(child) for child in node.fields]
    return group
