"""Answer schemas in each schema format, restating the api-server's tests
(test_data_query.rs: test_data_query_handler_schema_formats, test_metadata_handler_schema_formats,
test_data_tail_handler)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from protocol.query import RenderError, SchemaFormat
from protocol.query.schema import render_schema

QUERY_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("city", pa.string(), nullable=False),
        pa.field("population", pa.uint64(), nullable=False),
    ]
)
DATASET_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("op", pa.int32(), nullable=False),
        pa.field("system_time", pa.timestamp("ms", "UTC"), nullable=False),
        pa.field("event_time", pa.timestamp("ms", "UTC"), nullable=False),
        pa.field("city", pa.string(), nullable=False),
        pa.field("population", pa.uint64(), nullable=False),
    ]
)


def _arrow(name: str, data_type: object) -> dict[str, object]:
    return {
        "name": name,
        "data_type": data_type,
        "nullable": False,
        "dict_id": 0,
        "dict_is_ordered": False,
        "metadata": {},
    }


def test_query_schema_formats() -> None:
    """test_data_query_handler_schema_formats."""
    assert render_schema(QUERY_SCHEMA, SchemaFormat.ODF_JSON) == {
        "fields": [
            {"name": "offset", "type": {"kind": "Int64"}},
            {"name": "city", "type": {"kind": "String"}},
            {"name": "population", "type": {"kind": "UInt64"}},
        ]
    }
    assert render_schema(QUERY_SCHEMA, SchemaFormat.ODF_YAML) == (
        "fields:\n"
        "- name: offset\n  type:\n    kind: Int64\n"
        "- name: city\n  type:\n    kind: String\n"
        "- name: population\n  type:\n    kind: UInt64\n"
    )
    assert render_schema(QUERY_SCHEMA, SchemaFormat.ARROW_JSON) == {
        "fields": [
            _arrow("offset", "Int64"),
            _arrow("city", "Utf8"),
            _arrow("population", "UInt64"),
        ],
        "metadata": {},
    }
    assert render_schema(QUERY_SCHEMA, SchemaFormat.PARQUET) == (
        "message arrow_schema {\n"
        "  REQUIRED INT64 offset;\n"
        "  REQUIRED BYTE_ARRAY city (STRING);\n"
        "  REQUIRED INT64 population (INTEGER(64,false));\n"
        "}\n"
    )
    assert render_schema(QUERY_SCHEMA, SchemaFormat.PARQUET_JSON) == {
        "name": "arrow_schema",
        "type": "struct",
        "fields": [
            {"name": "offset", "repetition": "REQUIRED", "type": "INT64"},
            {
                "name": "city",
                "repetition": "REQUIRED",
                "type": "BYTE_ARRAY",
                "logicalType": "STRING",
            },
            {
                "name": "population",
                "repetition": "REQUIRED",
                "type": "INT64",
                "logicalType": "INTEGER(64,false)",
            },
        ],
    }


def test_dataset_schema_formats() -> None:
    """test_metadata_handler_schema_formats (and the ArrowJson schema of
    test_data_tail_handler)."""
    timestamp = {"kind": "Timestamp", "unit": "Millisecond", "timezone": "UTC"}
    assert render_schema(DATASET_SCHEMA, SchemaFormat.ODF_JSON) == {
        "fields": [
            {"name": "offset", "type": {"kind": "Int64"}},
            {"name": "op", "type": {"kind": "Int32"}},
            {"name": "system_time", "type": timestamp},
            {"name": "event_time", "type": timestamp},
            {"name": "city", "type": {"kind": "String"}},
            {"name": "population", "type": {"kind": "UInt64"}},
        ]
    }
    assert render_schema(DATASET_SCHEMA, SchemaFormat.ODF_YAML) == (
        "fields:\n"
        "- name: offset\n  type:\n    kind: Int64\n"
        "- name: op\n  type:\n    kind: Int32\n"
        "- name: system_time\n  type:\n    kind: Timestamp\n    unit: Millisecond\n"
        "    timezone: UTC\n"
        "- name: event_time\n  type:\n    kind: Timestamp\n    unit: Millisecond\n"
        "    timezone: UTC\n"
        "- name: city\n  type:\n    kind: String\n"
        "- name: population\n  type:\n    kind: UInt64\n"
    )
    milliseconds = {"Timestamp": ["Millisecond", "UTC"]}
    assert render_schema(DATASET_SCHEMA, SchemaFormat.ARROW_JSON) == {
        "fields": [
            _arrow("offset", "Int64"),
            _arrow("op", "Int32"),
            _arrow("system_time", milliseconds),
            _arrow("event_time", milliseconds),
            _arrow("city", "Utf8"),
            _arrow("population", "UInt64"),
        ],
        "metadata": {},
    }
    assert render_schema(DATASET_SCHEMA, SchemaFormat.PARQUET) == (
        "message arrow_schema {\n  REQUIRED INT64 offset;\n  REQUIRED INT32 op;\n"
        "  REQUIRED INT64 system_time (TIMESTAMP(MILLIS,true));\n"
        "  REQUIRED INT64 event_time (TIMESTAMP(MILLIS,true));\n"
        "  REQUIRED BYTE_ARRAY city (STRING);\n"
        "  REQUIRED INT64 population (INTEGER(64,false));\n}\n"
    )
    parquet_json = render_schema(DATASET_SCHEMA, SchemaFormat.PARQUET_JSON)
    assert parquet_json["fields"][2] == {
        "logicalType": "TIMESTAMP(MILLIS,true)",
        "name": "system_time",
        "repetition": "REQUIRED",
        "type": "INT64",
    }


def test_nested_and_logical_types() -> None:
    """The answer's schema names logical types only: views, large and Date64 layouts become the
    default ones, nullability is the field's."""
    schema = pa.schema(
        [
            pa.field("names", pa.list_(pa.string_view())),
            pa.field("point", pa.struct([("x", pa.float64()), ("y", pa.float32())])),
            pa.field("amount", pa.decimal128(30, 2)),
            pa.field("day", pa.date64()),
        ]
    )
    arrow = render_schema(schema, SchemaFormat.ARROW_JSON)
    types = [field["data_type"] for field in arrow["fields"]]
    assert types[0] == {
        "List": {
            "name": "item",
            "data_type": "Utf8",
            "nullable": True,
            "dict_id": 0,
            "dict_is_ordered": False,
            "metadata": {},
        }
    }
    assert [item["data_type"] for item in types[1]["Struct"]] == ["Float64", "Float32"]
    assert types[2] == {"Decimal128": [30, 2]}
    assert types[3] == "Date32"
    assert render_schema(schema, SchemaFormat.PARQUET) == (
        "message arrow_schema {\n"
        "  OPTIONAL group names (LIST) {\n"
        "    REPEATED group list {\n"
        "      OPTIONAL BYTE_ARRAY item (STRING);\n"
        "    }\n"
        "  }\n"
        "  OPTIONAL group point {\n"
        "    OPTIONAL DOUBLE x;\n"
        "    OPTIONAL FLOAT y;\n"
        "  }\n"
        "  OPTIONAL FIXED_LEN_BYTE_ARRAY (13) amount (DECIMAL(30,2));\n"
        "  OPTIONAL INT32 day (DATE);\n"
        "}\n"
    )


def test_schemas_odf_cannot_describe_are_refused() -> None:
    schema = pa.schema([pa.field("u", pa.dense_union([pa.field("a", pa.int8())]))])
    with pytest.raises(RenderError, match="cannot be described"):
        render_schema(schema, SchemaFormat.ARROW_JSON)
