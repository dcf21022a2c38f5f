"""The schema of a query answer in the formats the reference offers.

The reference first turns the result's Arrow schema into an ODF schema (RFC-016) and drops its
encoding attributes, so the answer names logical types only; every format is rendered from that:

- ``ArrowJson``: the ODF schema back in Arrow (default settings) as arrow-rs serializes it: a
  ``fields`` list of ``{name, data_type, nullable, dict_id, dict_is_ordered, metadata}`` and the
  schema's ``metadata``; types as serde names them (``"Int64"``,
  ``{"Timestamp": ["Millisecond", "UTC"]}``, ``{"List": {field}}``, ``{"Decimal128": [p, s]}``).
- ``OdfJson`` / ``OdfYaml``: the ODF ``DataSchema`` in its JSON and YAML manifest forms.
- ``Parquet`` / ``ParquetJson``: the Parquet schema the reference would write the data with
  (``protocol.query.parquet_schema``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from protocol.arrow_schema import (
    UnsupportedSchemaError,
    schema_from_arrow,
    schema_to_arrow,
    strip_encoding,
)
from protocol.codec import yaml as odf_yaml
from protocol.codec.tree import to_tree
from protocol.model import DataSchema
from protocol.query.errors import RenderError
from protocol.query.parquet_schema import format_json as parquet_json
from protocol.query.parquet_schema import format_text as parquet_text
from protocol.query.request import SchemaFormat

_UNIT_NAMES = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}


def answer_schema(schema: pa.Schema) -> DataSchema:
    """The logical ODF schema of a result, as the reference derives it."""
    try:
        return strip_encoding(schema_from_arrow(schema))
    except UnsupportedSchemaError as error:
        raise RenderError(f"the schema of the result cannot be described: {error}") from None


def render_schema(schema: pa.Schema, schema_format: SchemaFormat) -> Any:
    """The schema as the JSON value the answer's ``schema`` holds (a string for the text
    formats)."""
    odf = answer_schema(schema)
    if schema_format is SchemaFormat.ARROW_JSON:
        return arrow_json(schema_to_arrow(odf))
    if schema_format is SchemaFormat.ODF_JSON:
        return to_tree(odf)
    if schema_format is SchemaFormat.ODF_YAML:
        return odf_yaml.dumps(odf)
    arrow = schema_to_arrow(odf)
    if schema_format is SchemaFormat.PARQUET:
        return parquet_text(arrow)
    return parquet_json(arrow)


def arrow_json(schema: pa.Schema) -> dict[str, Any]:
    """arrow-rs's serde form of an Arrow schema."""
    return {
        "fields": [arrow_field_json(field) for field in schema],
        "metadata": _metadata(schema.metadata),
    }


def arrow_field_json(field: pa.Field) -> dict[str, Any]:
    return {
        "name": field.name,
        "data_type": arrow_type_json(field.type),
        "nullable": field.nullable,
        "dict_id": 0,
        "dict_is_ordered": bool(getattr(field.type, "ordered", False)),
        "metadata": _metadata(field.metadata),
    }


def arrow_type_json(kind: pa.DataType) -> Any:
    """arrow-rs's serde form of a data type."""
    simple = _SIMPLE.get(str(kind))
    if simple is not None:
        return simple
    if pa.types.is_timestamp(kind):
        return {"Timestamp": [_UNIT_NAMES[kind.unit], kind.tz]}
    if pa.types.is_time32(kind):
        return {"Time32": _UNIT_NAMES[kind.unit]}
    if pa.types.is_time64(kind):
        return {"Time64": _UNIT_NAMES[kind.unit]}
    if pa.types.is_duration(kind):
        return {"Duration": _UNIT_NAMES[kind.unit]}
    if pa.types.is_interval(kind):
        return {"Interval": "MonthDayNano"}
    if pa.types.is_fixed_size_binary(kind) and not pa.types.is_decimal(kind):
        return {"FixedSizeBinary": kind.byte_width}
    if pa.types.is_decimal(kind):
        return {f"Decimal{kind.bit_width}": [kind.precision, kind.scale]}
    if pa.types.is_fixed_size_list(kind):
        return {"FixedSizeList": [arrow_field_json(kind.value_field), kind.list_size]}
    for test, name in _LISTS:
        if test(kind):
            return {name: arrow_field_json(kind.value_field)}
    if pa.types.is_map(kind):
        entries = pa.field("entries", pa.struct([kind.key_field, kind.item_field]), nullable=False)
        return {"Map": [arrow_field_json(entries), kind.keys_sorted]}
    if pa.types.is_struct(kind):
        return {"Struct": [arrow_field_json(kind.field(index)) for index in range(kind.num_fields)]}
    if pa.types.is_dictionary(kind):
        return {"Dictionary": [arrow_type_json(kind.index_type), arrow_type_json(kind.value_type)]}
    raise RenderError(f"no Arrow JSON form for type {kind}")


_SIMPLE = {
    "null": "Null",
    "bool": "Boolean",
    "int8": "Int8",
    "int16": "Int16",
    "int32": "Int32",
    "int64": "Int64",
    "uint8": "UInt8",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "halffloat": "Float16",
    "float": "Float32",
    "double": "Float64",
    "date32[day]": "Date32",
    "date64[ms]": "Date64",
    "binary": "Binary",
    "large_binary": "LargeBinary",
    "binary_view": "BinaryView",
    "string": "Utf8",
    "large_string": "LargeUtf8",
    "string_view": "Utf8View",
}

_LISTS = (
    (pa.types.is_list, "List"),
    (pa.types.is_large_list, "LargeList"),
    (pa.types.is_list_view, "ListView"),
    (pa.types.is_large_list_view, "LargeListView"),
)


def _metadata(metadata: dict[bytes, bytes] | None) -> dict[str, str]:
    if not metadata:
        return {}
    return {key.decode(): value.decode() for key, value in metadata.items()}
