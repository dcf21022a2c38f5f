"""Arrow types as OData's Edm types, and values as the text of an Atom property, both as the
reference writes them (its ``datafusion-odata`` crate): integers widened to the nearest Edm
integer, timestamps with a time zone as UTC to the millisecond, without one to the precision
they have, dates as midnight, floats in the shortest text that reads back the same, never in
exponent form. A type without an Edm type here (decimals, binaries, lists, structs, times of
day, durations) is left out of the entity, as the reference leaves it out."""

from __future__ import annotations

from xml.sax.saxutils import escape as _escape

import numpy as np
import pyarrow as pa
import pyarrow.types as pt

_XML_QUOTES = {'"': "&quot;", "'": "&apos;"}
_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def xml_escape(text: str) -> str:
    """``text`` with the five XML special characters escaped (as ``quick_xml::escape``)."""
    return _escape(text, _XML_QUOTES)


def edm_type(data_type: pa.DataType) -> str | None:
    """The Edm type of an Arrow type, ``None`` when the reference has none for it."""
    if pt.is_boolean(data_type):
        return "Edm.Boolean"
    if pt.is_int8(data_type) or pt.is_int16(data_type):
        return "Edm.Int16"
    if pt.is_uint8(data_type) or pt.is_uint16(data_type):
        return "Edm.Int16"
    if pt.is_int32(data_type) or pt.is_uint32(data_type):
        return "Edm.Int32"
    if pt.is_int64(data_type) or pt.is_uint64(data_type):
        return "Edm.Int64"
    if pt.is_string(data_type) or pt.is_large_string(data_type) or pt.is_string_view(data_type):
        return "Edm.String"
    if pt.is_float16(data_type) or pt.is_float32(data_type):
        return "Edm.Single"
    if pt.is_float64(data_type):
        return "Edm.Double"
    if pt.is_timestamp(data_type):
        return "Edm.DateTime" if data_type.tz is None else "Edm.DateTimeOffset"
    if pt.is_date32(data_type) or pt.is_date64(data_type):
        return "Edm.DateTime"
    return None


def properties(schema: pa.Schema) -> tuple[str, ...]:
    """The names of the columns OData shows (those with an Edm type), in schema order."""
    return tuple(field.name for field in schema if edm_type(field.type) is not None)


def column_texts(array: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """Each value of a column of a supported type as escaped XML text (``None`` for a null)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    data_type = array.type
    valid = array.is_valid().to_pylist()
    if pt.is_timestamp(data_type):
        texts = _timestamps(array, data_type)
    elif pt.is_date32(data_type) or pt.is_date64(data_type):
        days = array.cast(pa.date32()).fill_null(0).cast(pa.int32()).to_numpy()
        texts = [f"{day}T00:00" for day in np.datetime_as_string(days.astype("datetime64[D]"))]
    elif pt.is_floating(data_type):
        texts = [_float(value) for value in array.fill_null(0).to_numpy(zero_copy_only=False)]
    elif pt.is_boolean(data_type):
        texts = ["true" if value else "false" for value in array.fill_null(False).to_pylist()]
    elif pt.is_integer(data_type):
        texts = [str(value) for value in array.fill_null(0).to_pylist()]
    else:
        texts = [
            xml_escape(value) for value in array.cast(pa.large_string()).fill_null("").to_pylist()
        ]
    return [text if ok else None for text, ok in zip(texts, valid, strict=True)]


def _timestamps(array: pa.Array, data_type: pa.TimestampType) -> list[str]:
    nanos = (
        array.cast(pa.int64()).fill_null(0).to_numpy().astype(object) * _NS_PER_UNIT[data_type.unit]
    )
    if data_type.tz is not None:  # RFC 3339 in UTC, to the millisecond (floored)
        millis = np.array([value // 1_000_000 for value in nanos], dtype="datetime64[ms]")
        return [f"{text}Z" for text in np.datetime_as_string(millis, unit="ms")]
    seconds = np.array([value // 1_000_000_000 for value in nanos], dtype="datetime64[s]")
    whole = np.datetime_as_string(seconds, unit="s")
    return [
        f"{text}{_fraction(value % 1_000_000_000)}"
        for text, value in zip(whole, nanos, strict=True)
    ]


def _fraction(nanos: int) -> str:
    """chrono's ``%.f``: no digits, or 3, 6 or 9, as few as show the value exactly."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def _float(value: np.floating) -> str:
    """Rust's ``Display`` of a float: the shortest digits that read back the same, positional."""
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return np.format_float_positional(value, unique=True, trim="-")
