"""pyarrow.Schema <-> ODF DataSchema, checked against the reference's own conversion cases."""

from __future__ import annotations

import pyarrow as pa
import pytest

from protocol.arrow_schema import (
    ToArrowSettings,
    UnsupportedSchemaError,
    schema_from_arrow,
    schema_to_arrow,
    strip_encoding,
)
from protocol.model import (
    DataField,
    DataSchema,
    DataTypeDate,
    DataTypeDecimal,
    DataTypeInt64,
    DataTypeList,
    DataTypeMap,
    DataTypeOption,
    DataTypeString,
    DataTypeStruct,
    DataTypeTimestamp,
    ExtraAttributes,
    JsonValue,
    TimeUnit,
)


def _extra(**entries: JsonValue) -> ExtraAttributes:
    return ExtraAttributes({f"arrow.apache.org/{key}": value for key, value in entries.items()})


def test_reference_field_from_to_arrow_case() -> None:
    # kamu-cli arrow_conversions.rs `test_field_from_to_arrow`.
    arrow = pa.schema(
        [
            pa.field("utf8", pa.string(), nullable=False),
            pa.field("utf8_large", pa.large_string(), nullable=False),
            pa.field("utf8_view", pa.string_view(), nullable=False),
            pa.field("date32", pa.date32(), nullable=False),
            pa.field("date64", pa.date64(), nullable=False),
            pa.field("decimal128", pa.decimal128(20, 5), nullable=False),
            pa.field("decimal256", pa.decimal256(20, 5), nullable=False),
        ]
    )
    expected = DataSchema(
        fields=(
            DataField(
                name="utf8",
                type=DataTypeString(),
                extra=_extra(bufferEncoding={"kind": "Contiguous", "offsetBitWidth": 32}),
            ),
            DataField(
                name="utf8_large",
                type=DataTypeString(),
                extra=_extra(bufferEncoding={"kind": "Contiguous", "offsetBitWidth": 64}),
            ),
            DataField(
                name="utf8_view",
                type=DataTypeString(),
                extra=_extra(bufferEncoding={"kind": "View", "offsetBitWidth": 32}),
            ),
            DataField(name="date32", type=DataTypeDate()),
            DataField(
                name="date64",
                type=DataTypeDate(),
                extra=_extra(dateEncoding={"unit": "Millisecond"}),
            ),
            DataField(
                name="decimal128",
                type=DataTypeDecimal(precision=20, scale=5),
                extra=_extra(decimalEncoding={"bitWidth": 128}),
            ),
            DataField(
                name="decimal256",
                type=DataTypeDecimal(precision=20, scale=5),
                extra=_extra(decimalEncoding={"bitWidth": 256}),
            ),
        )
    )
    odf = schema_from_arrow(arrow)
    assert odf == expected
    assert schema_to_arrow(odf) == arrow


ROUND_TRIP = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", pa.timestamp("ms", "UTC"), nullable=False),
        pa.field("event_time", pa.timestamp("us", "+01:00")),
        *[
            pa.field(str(t), t)
            for t in [pa.int8(), pa.int16(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
        ],
        *[
            pa.field(str(t), t)
            for t in [pa.float16(), pa.float32(), pa.float64(), pa.bool_(), pa.null()]
        ],
        pa.field("bin", pa.binary()),
        pa.field("large_bin", pa.large_binary()),
        pa.field("bin_view", pa.binary_view()),
        pa.field("fixed", pa.binary(16)),
        pa.field("t32", pa.time32("s")),
        pa.field("t64", pa.time64("ns")),
        pa.field("dur", pa.duration("us")),
        pa.field("d32", pa.decimal32(9, 2)),
        pa.field("d64", pa.decimal64(18, -3)),
        pa.field("list", pa.list_(pa.field("item", pa.int32(), nullable=False))),
        pa.field("large_list", pa.large_list(pa.string())),
        pa.field("list_view", pa.list_view(pa.int8())),
        pa.field("fixed_list", pa.list_(pa.float64(), 3)),
        pa.field(
            "nested",
            pa.struct(
                [
                    pa.field("a", pa.int64(), nullable=False),
                    pa.field("s", pa.struct([("b", pa.large_string())])),
                ]
            ),
        ),
        pa.field(
            "map",
            pa.map_(
                pa.field("keys", pa.int32(), nullable=False),
                pa.field("values", pa.int64()),
                keys_sorted=True,
            ),
        ),
    ]
)


def test_round_trip_preserves_every_representable_schema() -> None:
    assert schema_to_arrow(schema_from_arrow(ROUND_TRIP)) == ROUND_TRIP


def test_nullability_is_option_at_every_level() -> None:
    odf = schema_from_arrow(
        pa.schema(
            [
                pa.field("n", pa.int64()),
                pa.field(
                    "s", pa.struct([pa.field("x", pa.string(), nullable=False)]), nullable=False
                ),
                pa.field(
                    "l", pa.list_(pa.field("item", pa.int64(), nullable=True)), nullable=False
                ),
            ]
        )
    )
    n, s, lst = odf.fields
    assert n.type == DataTypeOption(inner=DataTypeInt64())
    assert isinstance(s.type, DataTypeStruct) and s.type.fields[0].type == DataTypeString()
    assert lst.type == DataTypeList(item_type=DataTypeOption(inner=DataTypeInt64()))


def test_timestamp_without_zone_defaults_to_utc_going_back_to_arrow() -> None:
    odf = schema_from_arrow(pa.schema([pa.field("t", pa.timestamp("ns"), nullable=False)]))
    assert odf.fields[0].type == DataTypeTimestamp(unit=TimeUnit.NANOSECOND, timezone=None)
    assert schema_to_arrow(odf).field("t").type == pa.timestamp("ns", "UTC")


def test_plain_odf_types_use_default_layouts_and_settings() -> None:
    odf = DataSchema(
        fields=(
            DataField(name="s", type=DataTypeString()),
            DataField(name="l", type=DataTypeList(item_type=DataTypeString())),
            DataField(name="d", type=DataTypeDate()),
            DataField(name="big", type=DataTypeDecimal(precision=50, scale=2)),
            DataField(name="t", type=DataTypeTimestamp()),
        )
    )
    assert schema_to_arrow(odf) == pa.schema(
        [
            pa.field("s", pa.string(), nullable=False),
            pa.field("l", pa.list_(pa.field("item", pa.string(), nullable=False)), nullable=False),
            pa.field("d", pa.date32(), nullable=False),
            pa.field("big", pa.decimal256(50, 2), nullable=False),
            pa.field("t", pa.timestamp("ms", "UTC"), nullable=False),
        ]
    )
    settings = ToArrowSettings(
        default_string_encoding={"kind": "View"},
        default_list_encoding={"kind": "Contiguous", "offsetBitWidth": 64},
        default_date_encoding={"unit": "Millisecond"},
    )
    converted = schema_to_arrow(odf, settings)
    assert converted.field("s").type == pa.string_view()
    assert converted.field("l").type == pa.large_list(
        pa.field("item", pa.string_view(), nullable=False)
    )
    assert converted.field("d").type == pa.date64()


def test_encoding_aliases_are_accepted() -> None:
    odf = DataSchema(
        fields=(
            DataField(
                name="s",
                type=DataTypeString(),
                extra=_extra(bufferEncoding={"kind": "contiguous", "offsetBitWidth": 64}),
            ),
            DataField(
                name="d", type=DataTypeDate(), extra=_extra(dateEncoding={"unit": "millisecond"})
            ),
        )
    )
    assert schema_to_arrow(odf) == pa.schema(
        [
            pa.field("s", pa.large_string(), nullable=False),
            pa.field("d", pa.date64(), nullable=False),
        ]
    )


def test_strip_encoding_keeps_other_attributes() -> None:
    odf = schema_from_arrow(pa.schema([pa.field("s", pa.large_string())]))
    field = odf.fields[0]
    assert field.extra is not None
    extra = field.extra.with_entries(**{"kamu.dev/x": 1})
    # with_entries keeps the map's class; its return hint says only FrozenMap.
    assert isinstance(extra, ExtraAttributes)
    tagged = DataSchema(fields=(DataField(name="s", type=field.type, extra=extra),))
    stripped = strip_encoding(tagged)
    assert stripped.fields[0].extra == ExtraAttributes({"kamu.dev/x": 1})
    assert strip_encoding(odf).fields[0].extra is None


@pytest.mark.parametrize(
    "arrow",
    [
        pa.dictionary(pa.int32(), pa.string()),
        pa.month_day_nano_interval(),
        pa.dense_union([pa.field("a", pa.int8())]),
        pa.map_(pa.string(), pa.int32()),  # string keys carry a buffer encoding
    ],
    ids=str,
)
def test_types_the_reference_rejects(arrow: pa.DataType) -> None:
    with pytest.raises(UnsupportedSchemaError, match="field 'bad'"):
        schema_from_arrow(pa.schema([pa.field("bad", arrow)]))


@pytest.mark.parametrize(
    "field",
    [
        DataField(name="bad", type=DataTypeString(), extra=_extra(dateEncoding={"unit": "Day"})),
        DataField(
            name="bad",
            type=DataTypeString(),
            extra=_extra(bufferEncoding={"kind": "View", "offsetBitWidth": 64}),
        ),
        DataField(
            name="bad", type=DataTypeString(), extra=_extra(bufferEncoding={"kind": "Weird"})
        ),
        DataField(name="bad", type=DataTypeDecimal(precision=80, scale=0)),
        DataField(
            name="bad",
            type=DataTypeDecimal(precision=10, scale=0),
            extra=_extra(decimalEncoding={"bitWidth": 48}),
        ),
        DataField(name="bad", type=DataTypeOption(inner=DataTypeOption(inner=DataTypeInt64()))),
        DataField(
            name="bad",
            type=DataTypeMap(
                key_type=DataTypeOption(inner=DataTypeString()), value_type=DataTypeInt64()
            ),
        ),
    ],
)
def test_unrepresentable_odf_fields_are_typed_errors(field: DataField) -> None:
    with pytest.raises(UnsupportedSchemaError, match="field 'bad'"):
        schema_to_arrow(DataSchema(fields=(field,)))
