"""Which Arrow types the logical hash accepts, and the bytes that identify each one in the hash.

arrow-digest starts every leaf column's hasher with an encoding of the column's data type
(``hash_data_type`` in its ``schema_digest.rs``). Types that differ only in physical layout
(``string``/``large_string``/``string_view``; the binary and list variants) encode the same, so
their data hash the same. Dictionary columns are hashed as their decoded values and extension
columns as their storage, which is what a reader without those encodings (kamu-cli reading the
same Parquet file) sees.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.types as pat

from protocol.hashing.errors import UnsupportedDataTypeError

# Type ids (u16) of arrow-digest, named after the Arrow FlatBuffers schema.
_INT = 1
_FLOATING_POINT = 2
_BINARY = 3
_UTF8 = 4
_BOOL = 5
_DECIMAL = 6
_DATE = 7
_TIME = 8
_TIMESTAMP = 9
_LIST = 11

_DATE_UNIT_DAY = 0
_DATE_UNIT_MILLISECOND = 1
_TIME_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}

_U64_MASK = (1 << 64) - 1


def _u16(value: int) -> bytes:
    return struct.pack("<H", value)


def _u64(value: int) -> bytes:
    # Rust's `as u64` on a negative i8 (a decimal's scale) sign-extends; mask to match.
    return struct.pack("<Q", value & _U64_MASK)


def logical_type(data_type: pa.DataType) -> pa.DataType:
    """The type a column is hashed as: dictionaries decoded, extension types as their storage."""
    if isinstance(data_type, pa.ExtensionType):
        return logical_type(data_type.storage_type)
    if pat.is_dictionary(data_type):
        return logical_type(data_type.value_type)
    if pat.is_struct(data_type):
        return pa.struct([_logical_field(data_type.field(i)) for i in range(data_type.num_fields)])
    if pat.is_large_list(data_type):
        return pa.large_list(_logical_field(data_type.value_field))
    if pat.is_fixed_size_list(data_type):
        return pa.list_(_logical_field(data_type.value_field), data_type.list_size)
    if pat.is_list(data_type):
        return pa.list_(_logical_field(data_type.value_field))
    return data_type


def _logical_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, logical_type(field.type), field.nullable)


def logical_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field's type replaced by its :func:`logical_type`, metadata dropped."""
    return pa.schema([_logical_field(field) for field in schema])


def encode_data_type(data_type: pa.DataType, column: str) -> bytes:
    """The bytes arrow-digest feeds a leaf column's hasher before its values.

    ``data_type`` must already be a :func:`logical_type`; ``column`` names the column in errors.
    Raises :class:`UnsupportedDataTypeError` for types arrow-digest cannot hash.
    """
    if pat.is_boolean(data_type):
        return _u16(_BOOL)
    if pat.is_integer(data_type):
        signed = 1 if pat.is_signed_integer(data_type) else 0
        return _u16(_INT) + bytes([signed]) + _u64(data_type.bit_width)
    if pat.is_floating(data_type):
        return _u16(_FLOATING_POINT) + _u64(data_type.bit_width)
    if pat.is_decimal(data_type):
        return (
            _u16(_DECIMAL)
            + _u64(data_type.bit_width)
            + _u64(data_type.precision)
            + _u64(data_type.scale)
        )
    if pat.is_timestamp(data_type):
        zone = data_type.tz
        # A missing zone is one zero byte; a present one (even "") is length-prefixed UTF-8.
        zone_bytes = b"\x00" if zone is None else _u64(len(zone.encode())) + zone.encode()
        return _u16(_TIMESTAMP) + _u16(_TIME_UNITS[data_type.unit]) + zone_bytes
    if pat.is_date32(data_type):
        return _u16(_DATE) + _u64(32) + _u16(_DATE_UNIT_DAY)
    if pat.is_date64(data_type):
        return _u16(_DATE) + _u64(64) + _u16(_DATE_UNIT_MILLISECOND)
    if pat.is_time32(data_type) or pat.is_time64(data_type):
        return _u16(_TIME) + _u64(data_type.bit_width) + _u16(_TIME_UNITS[data_type.unit])
    if (
        pat.is_binary(data_type)
        or pat.is_large_binary(data_type)
        or pat.is_fixed_size_binary(data_type)
        or pat.is_binary_view(data_type)
    ):
        return _u16(_BINARY)
    if pat.is_string(data_type) or pat.is_large_string(data_type) or pat.is_string_view(data_type):
        return _u16(_UTF8)
    if pat.is_list(data_type) or pat.is_large_list(data_type) or pat.is_fixed_size_list(data_type):
        item = data_type.value_type
        if pat.is_struct(item):
            raise UnsupportedDataTypeError(column, data_type, "lists of structs are not hashable")
        return _u16(_LIST) + encode_data_type(item, f"{column}[]")
    raise UnsupportedDataTypeError(column, data_type, _unsupported_reason(data_type))


def _unsupported_reason(data_type: pa.DataType) -> str:
    if pat.is_duration(data_type):
        return "durations have no encoding in RecordsDigestV0"
    if pat.is_map(data_type):
        return "maps have no encoding in RecordsDigestV0"
    if pat.is_null(data_type):
        return "columns of the null type cannot be hashed"
    return "no encoding in RecordsDigestV0"
