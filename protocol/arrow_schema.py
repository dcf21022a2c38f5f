"""Conversion between ``pyarrow.Schema`` and the ODF ``DataSchema`` (RFC-016), as kamu-cli does it.

ODF types are logical: nullability is ``Option``, and how Arrow lays the data out (32/64-bit
offsets, views, Date64, decimal width) goes into the field's extra attributes
``arrow.apache.org/bufferEncoding``, ``…/dateEncoding`` and ``…/decimalEncoding``, so that
``schema_to_arrow(schema_from_arrow(s)) == s`` for every schema the reference can represent.
Both directions follow the reference's ``arrow_conversions.rs`` case by case, including what it
rejects (dictionaries, unions, intervals) and its defaults (timestamps in UTC, units in ms).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.types as pat

from protocol.errors import ProtocolError
from protocol.model import (
    DataField,
    DataSchema,
    DataType,
    DataTypeBinary,
    DataTypeBool,
    DataTypeDate,
    DataTypeDecimal,
    DataTypeDuration,
    DataTypeFloat16,
    DataTypeFloat32,
    DataTypeFloat64,
    DataTypeInt8,
    DataTypeInt16,
    DataTypeInt32,
    DataTypeInt64,
    DataTypeList,
    DataTypeMap,
    DataTypeNull,
    DataTypeOption,
    DataTypeString,
    DataTypeStruct,
    DataTypeTime,
    DataTypeTimestamp,
    DataTypeUInt8,
    DataTypeUInt16,
    DataTypeUInt32,
    DataTypeUInt64,
    ExtraAttributes,
    JsonValue,
    TimeUnit,
)

BUFFER_ENCODING = "arrow.apache.org/bufferEncoding"
DATE_ENCODING = "arrow.apache.org/dateEncoding"
DECIMAL_ENCODING = "arrow.apache.org/decimalEncoding"
ENCODING_KEYS = (BUFFER_ENCODING, DATE_ENCODING, DECIMAL_ENCODING)

MAX_PRECISION_128 = 39
MAX_PRECISION_256 = 77

_DEFAULT_UNIT = TimeUnit.MILLISECOND
_DEFAULT_TIMEZONE = "UTC"

_UNIT_TO_ARROW = {
    TimeUnit.SECOND: "s",
    TimeUnit.MILLISECOND: "ms",
    TimeUnit.MICROSECOND: "us",
    TimeUnit.NANOSECOND: "ns",
}
_UNIT_FROM_ARROW = {arrow: odf for odf, arrow in _UNIT_TO_ARROW.items()}

_SIMPLE_FROM_ARROW: dict[pa.DataType, DataType] = {
    pa.null(): DataTypeNull(),
    pa.bool_(): DataTypeBool(),
    pa.int8(): DataTypeInt8(),
    pa.int16(): DataTypeInt16(),
    pa.int32(): DataTypeInt32(),
    pa.int64(): DataTypeInt64(),
    pa.uint8(): DataTypeUInt8(),
    pa.uint16(): DataTypeUInt16(),
    pa.uint32(): DataTypeUInt32(),
    pa.uint64(): DataTypeUInt64(),
    pa.float16(): DataTypeFloat16(),
    pa.float32(): DataTypeFloat32(),
    pa.float64(): DataTypeFloat64(),
    pa.date32(): DataTypeDate(),
}
_SIMPLE_TO_ARROW: dict[type, pa.DataType] = {
    type(odf): arrow for arrow, odf in _SIMPLE_FROM_ARROW.items()
}

# Kinds as the reference writes them, and the spellings it also reads.
_BUFFER_KINDS = {
    "Contiguous": "Contiguous",
    "contiguous": "Contiguous",
    "View": "View",
    "view": "View",
    "RunEnd": "RunEnd",
    "runEnd": "RunEnd",
    "runend": "RunEnd",
}
_DATE_UNITS = {
    "Day": "Day",
    "day": "Day",
    "Millisecond": "Millisecond",
    "millisecond": "Millisecond",
}


class UnsupportedSchemaError(ProtocolError, ValueError):
    """A schema has no representation on the other side (the reference rejects it too)."""


@dataclass(frozen=True, slots=True)
class ToArrowSettings:
    """Encodings to use where a field does not state one (the reference's ``ToArrowSettings``).

    Each is the JSON value of the matching extra attribute, e.g. ``{"kind": "View"}``.
    """

    default_binary_encoding: Mapping[str, JsonValue] | None = None
    default_string_encoding: Mapping[str, JsonValue] | None = None
    default_list_encoding: Mapping[str, JsonValue] | None = None
    default_date_encoding: Mapping[str, JsonValue] | None = None


# --- Arrow -> ODF -----------------------------------------------------------------------------


def schema_from_arrow(schema: pa.Schema) -> DataSchema:
    """The ODF schema of an Arrow schema, encodings recorded as extra attributes."""
    return DataSchema(fields=tuple(_field_from_arrow(field, field.name) for field in schema))


def _field_from_arrow(field: pa.Field, path: str) -> DataField:
    data_type, encoding = _type_from_arrow(field.type, field.nullable, path)
    return DataField(
        name=field.name, type=data_type, extra=ExtraAttributes(encoding) if encoding else None
    )


def _type_from_arrow(
    arrow: pa.DataType, nullable: bool, path: str
) -> tuple[DataType, dict[str, JsonValue]]:
    odf, encoding = _non_null_type_from_arrow(arrow, path)
    return (DataTypeOption(inner=odf) if nullable else odf), encoding


def _contiguous(bits: int) -> dict[str, JsonValue]:
    return {BUFFER_ENCODING: {"kind": "Contiguous", "offsetBitWidth": bits}}


def _view(bits: int) -> dict[str, JsonValue]:
    return {BUFFER_ENCODING: {"kind": "View", "offsetBitWidth": bits}}


def _non_null_type_from_arrow(
    arrow: pa.DataType, path: str
) -> tuple[DataType, dict[str, JsonValue]]:
    simple = _SIMPLE_FROM_ARROW.get(arrow)
    if simple is not None:
        return simple, {}
    if pat.is_timestamp(arrow):
        return DataTypeTimestamp(unit=_UNIT_FROM_ARROW[arrow.unit], timezone=arrow.tz), {}
    if pat.is_date64(arrow):
        return DataTypeDate(), {DATE_ENCODING: {"unit": "Millisecond"}}
    if pat.is_time32(arrow) or pat.is_time64(arrow):
        return DataTypeTime(unit=_UNIT_FROM_ARROW[arrow.unit]), {}
    if pat.is_duration(arrow):
        return DataTypeDuration(unit=_UNIT_FROM_ARROW[arrow.unit]), {}
    if pat.is_binary(arrow):
        return DataTypeBinary(), _contiguous(32)
    if pat.is_large_binary(arrow):
        return DataTypeBinary(), _contiguous(64)
    if pat.is_binary_view(arrow):
        return DataTypeBinary(), _view(32)
    if pat.is_fixed_size_binary(arrow):
        return DataTypeBinary(fixed_length=arrow.byte_width), {}
    if pat.is_string(arrow):
        return DataTypeString(), _contiguous(32)
    if pat.is_large_string(arrow):
        return DataTypeString(), _contiguous(64)
    if pat.is_string_view(arrow):
        return DataTypeString(), _view(32)
    if (
        pat.is_list(arrow)
        or pat.is_large_list(arrow)
        or pat.is_list_view(arrow)
        or pat.is_large_list_view(arrow)
    ):
        item, _ = _type_from_arrow(arrow.value_type, arrow.value_field.nullable, f"{path}[]")
        bits = 64 if pat.is_large_list(arrow) or pat.is_large_list_view(arrow) else 32
        view = pat.is_list_view(arrow) or pat.is_large_list_view(arrow)
        return DataTypeList(item_type=item), (_view(bits) if view else _contiguous(bits))
    if pat.is_fixed_size_list(arrow):
        item, _ = _type_from_arrow(arrow.value_type, arrow.value_field.nullable, f"{path}[]")
        return DataTypeList(item_type=item, fixed_length=arrow.list_size), {}
    if pat.is_struct(arrow):
        fields = tuple(
            _field_from_arrow(arrow.field(i), f"{path}.{arrow.field(i).name}")
            for i in range(arrow.num_fields)
        )
        return DataTypeStruct(fields=fields), {}
    if pat.is_decimal(arrow):
        return (
            DataTypeDecimal(precision=arrow.precision, scale=arrow.scale),
            {DECIMAL_ENCODING: {"bitWidth": arrow.bit_width}},
        )
    if pat.is_map(arrow):
        return _map_from_arrow(arrow, path), {}
    if pat.is_run_end_encoded(arrow):
        value, value_encoding = _type_from_arrow(arrow.value_type, True, f"{path}.values")
        if value_encoding:
            raise UnsupportedSchemaError(
                f"field '{path}': run-end encoding of a type with its own encoding "
                f"{value_encoding} is not supported"
            )
        inner = value.inner if isinstance(value, DataTypeOption) else value
        bits = arrow.run_end_type.bit_width
        return inner, {BUFFER_ENCODING: {"kind": "RunEnd", "runEndsBitWidth": bits}}
    raise UnsupportedSchemaError(f"field '{path}': Arrow type {arrow} has no ODF schema equivalent")


def _map_from_arrow(arrow: pa.MapType, path: str) -> DataTypeMap:
    key, key_encoding = _type_from_arrow(arrow.key_type, arrow.key_field.nullable, f"{path}.key")
    value, value_encoding = _type_from_arrow(
        arrow.item_type, arrow.item_field.nullable, f"{path}.value"
    )
    if key_encoding or value_encoding:
        raise UnsupportedSchemaError(
            f"field '{path}': map keys and values with a custom encoding are not supported"
        )
    return DataTypeMap(key_type=key, value_type=value, keys_sorted=arrow.keys_sorted)


# --- ODF -> Arrow -----------------------------------------------------------------------------


def schema_to_arrow(schema: DataSchema, settings: ToArrowSettings | None = None) -> pa.Schema:
    """The Arrow schema of an ODF schema, honouring encoding attributes, else ``settings``."""
    settings = settings or ToArrowSettings()
    return pa.schema([_field_to_arrow(field, field.name, settings) for field in schema.fields])


def _field_to_arrow(field: DataField, path: str, settings: ToArrowSettings) -> pa.Field:
    encoding = {key: value for key, value in (field.extra or {}).items() if key in ENCODING_KEYS}
    arrow, nullable = _type_to_arrow(field.type, encoding, path, settings)
    return pa.field(field.name, arrow, nullable)


def _type_to_arrow(
    odf: DataType, encoding: Mapping[str, JsonValue], path: str, settings: ToArrowSettings
) -> tuple[pa.DataType, bool]:
    if isinstance(odf, DataTypeOption):
        if isinstance(odf.inner, DataTypeOption):
            raise UnsupportedSchemaError(f"field '{path}': nested Option types are not supported")
        arrow, _ = _type_to_arrow(odf.inner, encoding, path, settings)
        return arrow, True
    if not encoding:
        encoding = _default_encoding(odf, settings)
    if len(encoding) > 1:
        raise UnsupportedSchemaError(f"field '{path}': conflicting encodings {dict(encoding)}")
    if BUFFER_ENCODING in encoding:
        return _buffer_encoded_to_arrow(odf, encoding[BUFFER_ENCODING], path, settings), False
    if DATE_ENCODING in encoding:
        return _date_encoded_to_arrow(odf, encoding[DATE_ENCODING], path), False
    if DECIMAL_ENCODING in encoding:
        return _decimal_encoded_to_arrow(odf, encoding[DECIMAL_ENCODING], path), False
    return _plain_to_arrow(odf, path, settings), False


def _default_encoding(odf: DataType, settings: ToArrowSettings) -> dict[str, JsonValue]:
    default = {
        DataTypeBinary: (BUFFER_ENCODING, settings.default_binary_encoding),
        DataTypeString: (BUFFER_ENCODING, settings.default_string_encoding),
        DataTypeList: (BUFFER_ENCODING, settings.default_list_encoding),
        DataTypeDate: (DATE_ENCODING, settings.default_date_encoding),
    }.get(type(odf))
    if default is None or default[1] is None:
        return {}
    return {default[0]: dict(default[1])}


def _plain_to_arrow(odf: DataType, path: str, settings: ToArrowSettings) -> pa.DataType:
    simple = _SIMPLE_TO_ARROW.get(type(odf))
    if simple is not None:
        return simple
    if isinstance(odf, DataTypeBinary):
        return pa.binary() if odf.fixed_length is None else pa.binary(odf.fixed_length)
    if isinstance(odf, DataTypeString):
        return pa.string()
    if isinstance(odf, DataTypeDecimal):
        if odf.precision <= MAX_PRECISION_128:
            return pa.decimal128(odf.precision, odf.scale)
        if odf.precision <= MAX_PRECISION_256:
            return pa.decimal256(odf.precision, odf.scale)
        raise UnsupportedSchemaError(
            f"field '{path}': decimal precision {odf.precision} exceeds Arrow's largest "
            f"(256-bit) decimal, whose maximum is {MAX_PRECISION_256}"
        )
    if isinstance(odf, DataTypeDuration):
        return pa.duration(_UNIT_TO_ARROW[odf.unit or _DEFAULT_UNIT])
    if isinstance(odf, DataTypeTime):
        unit = _UNIT_TO_ARROW[odf.unit or _DEFAULT_UNIT]
        return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    if isinstance(odf, DataTypeTimestamp):
        return pa.timestamp(
            _UNIT_TO_ARROW[odf.unit or _DEFAULT_UNIT], odf.timezone or _DEFAULT_TIMEZONE
        )
    if isinstance(odf, DataTypeList):
        item = _list_item_field(odf, path, settings)
        return pa.list_(item) if odf.fixed_length is None else pa.list_(item, odf.fixed_length)
    if isinstance(odf, DataTypeStruct):
        return pa.struct(
            [_field_to_arrow(field, f"{path}.{field.name}", settings) for field in odf.fields]
        )
    if isinstance(odf, DataTypeMap):
        key, key_nullable = _type_to_arrow(odf.key_type, {}, f"{path}.key", settings)
        value, value_nullable = _type_to_arrow(odf.value_type, {}, f"{path}.value", settings)
        if key_nullable:
            raise UnsupportedSchemaError(f"field '{path}': Arrow map keys cannot be nullable")
        return pa.map_(
            pa.field("keys", key, nullable=False),
            pa.field("values", value, value_nullable),
            keys_sorted=bool(odf.keys_sorted),
        )
    raise UnsupportedSchemaError(f"field '{path}': ODF type {odf} has no Arrow equivalent")


def _list_item_field(odf: DataTypeList, path: str, settings: ToArrowSettings) -> pa.Field:
    item, nullable = _type_to_arrow(odf.item_type, {}, f"{path}[]", settings)
    return pa.field("item", item, nullable)


def _buffer_encoded_to_arrow(
    odf: DataType, encoding: JsonValue, path: str, settings: ToArrowSettings
) -> pa.DataType:
    kind, bits = _buffer_encoding(encoding, path)
    variable = {
        (DataTypeBinary, "Contiguous", 32): pa.binary(),
        (DataTypeBinary, "Contiguous", 64): pa.large_binary(),
        (DataTypeBinary, "View", 32): pa.binary_view(),
        (DataTypeString, "Contiguous", 32): pa.string(),
        (DataTypeString, "Contiguous", 64): pa.large_string(),
        (DataTypeString, "View", 32): pa.string_view(),
    }
    if isinstance(odf, DataTypeBinary) and odf.fixed_length is not None:
        raise _unsupported_encoding(odf, encoding, path)
    if isinstance(odf, DataTypeList) and odf.fixed_length is None:
        item = _list_item_field(odf, path, settings)
        lists = {
            ("Contiguous", 32): pa.list_,
            ("Contiguous", 64): pa.large_list,
            ("View", 32): pa.list_view,
            ("View", 64): pa.large_list_view,
        }
        make = lists.get((kind, bits))
        if make is None:
            raise _unsupported_encoding(odf, encoding, path)
        return make(item)
    arrow = variable.get((type(odf), kind, bits))
    if arrow is None:
        raise _unsupported_encoding(odf, encoding, path)
    return arrow


def _buffer_encoding(encoding: JsonValue, path: str) -> tuple[str, int]:
    """``(kind, offset bit width)`` of a ``bufferEncoding`` value; the width defaults to 32."""
    kind_text = encoding.get("kind") if isinstance(encoding, dict) else None
    if (
        not isinstance(encoding, dict)
        or not isinstance(kind_text, str)
        or kind_text not in _BUFFER_KINDS
    ):
        raise UnsupportedSchemaError(f"field '{path}': invalid {BUFFER_ENCODING} {encoding!r}")
    kind = _BUFFER_KINDS[kind_text]
    allowed = {"kind", "runEndsBitWidth"} if kind == "RunEnd" else {"kind", "offsetBitWidth"}
    if set(encoding) - allowed:
        raise UnsupportedSchemaError(f"field '{path}': invalid {BUFFER_ENCODING} {encoding!r}")
    bits = encoding.get("offsetBitWidth")
    if bits is None:
        return kind, 32
    if not isinstance(bits, int):
        raise UnsupportedSchemaError(f"field '{path}': invalid {BUFFER_ENCODING} {encoding!r}")
    return kind, bits


def _date_encoded_to_arrow(odf: DataType, encoding: JsonValue, path: str) -> pa.DataType:
    if (
        not isinstance(encoding, dict)
        or set(encoding) != {"unit"}
        or encoding["unit"] not in _DATE_UNITS
    ):
        raise UnsupportedSchemaError(f"field '{path}': invalid {DATE_ENCODING} {encoding!r}")
    if not isinstance(odf, DataTypeDate):
        raise _unsupported_encoding(odf, encoding, path)
    return pa.date32() if _DATE_UNITS[encoding["unit"]] == "Day" else pa.date64()


def _decimal_encoded_to_arrow(odf: DataType, encoding: JsonValue, path: str) -> pa.DataType:
    if not isinstance(encoding, dict) or set(encoding) != {"bitWidth"}:
        raise UnsupportedSchemaError(f"field '{path}': invalid {DECIMAL_ENCODING} {encoding!r}")
    makers = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}
    width = encoding["bitWidth"]
    make = makers.get(width) if isinstance(width, int) else None
    if not isinstance(odf, DataTypeDecimal) or make is None:
        raise _unsupported_encoding(odf, encoding, path)
    try:
        return make(odf.precision, odf.scale)
    except ValueError as error:
        raise UnsupportedSchemaError(f"field '{path}': {error}") from error


def _unsupported_encoding(odf: DataType, encoding: JsonValue, path: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(
        f"field '{path}': type {type(odf).__name__} cannot have the encoding {encoding!r}"
    )


def strip_encoding(schema: DataSchema) -> DataSchema:
    """``schema`` without the Arrow encoding attributes (the reference's ``strip_encoding``)."""
    return DataSchema(
        fields=tuple(_strip_field(field) for field in schema.fields), extra=schema.extra
    )


def _strip_field(field: DataField) -> DataField:
    extra = {k: v for k, v in (field.extra or {}).items() if k not in ENCODING_KEYS}
    return DataField(
        name=field.name,
        type=_strip_type(field.type),
        extra=ExtraAttributes(extra) if extra else None,
    )


def _strip_type(odf: DataType) -> DataType:
    if isinstance(odf, DataTypeOption):
        return DataTypeOption(inner=_strip_type(odf.inner))
    if isinstance(odf, DataTypeStruct):
        return DataTypeStruct(fields=tuple(_strip_field(field) for field in odf.fields))
    return odf
