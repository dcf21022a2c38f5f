"""The Flight SQL metadata results: catalogs, database schemas, tables, table types and keys.

Datasets are tables of one catalog and one database schema, the names DataFusion's session uses
(``odf``.``odf``), so a name a listing shows also works in a query (``odf.odf."alice/trades"``).
Beside it the session's ``information_schema`` (its ``tables``, ``columns``, …, views over what
the caller may read) is listed too, as the reference lists it, for tools that browse the catalog
through it. Each result has the schema the Flight SQL protocol defines for it, ordered as it
says (by catalog, schema, table).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from odfd.flight_sql.service import TableInfo

CATALOG = "odf"
DB_SCHEMA = "odf"
TABLE_TYPE = "TABLE"
INFORMATION_SCHEMA = "information_schema"
INFORMATION_SCHEMA_TABLES = (
    "columns",
    "df_settings",
    "parameters",
    "routines",
    "schemata",
    "tables",
    "views",
)
"""DataFusion's ``information_schema`` views, as its own ``information_schema.tables`` lists
them (type ``VIEW``)."""
SYSTEM_TABLE_TYPE = "VIEW"

CATALOGS_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8(), nullable=False)])
DB_SCHEMAS_SCHEMA = pa.schema(
    [pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8(), nullable=False)]
)
_TABLE_FIELDS = [
    pa.field("catalog_name", pa.utf8()),
    pa.field("db_schema_name", pa.utf8()),
    pa.field("table_name", pa.utf8(), nullable=False),
    pa.field("table_type", pa.utf8(), nullable=False),
]
TABLES_SCHEMA = pa.schema(_TABLE_FIELDS)
TABLES_WITH_SCHEMA_SCHEMA = pa.schema(
    [*_TABLE_FIELDS, pa.field("table_schema", pa.binary(), nullable=False)]
)
TABLE_TYPES_SCHEMA = pa.schema([pa.field("table_type", pa.utf8(), nullable=False)])
TABLE_TYPES = (TABLE_TYPE, "VIEW")
"""The table types offered, as the reference lists them (every dataset is a ``TABLE``)."""
PRIMARY_KEYS_SCHEMA = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8()),
        pa.field("table_name", pa.utf8(), nullable=False),
        pa.field("column_name", pa.utf8(), nullable=False),
        pa.field("key_name", pa.utf8()),
        pa.field("key_sequence", pa.int32(), nullable=False),
    ]
)
KEYS_SCHEMA = pa.schema(
    [
        pa.field("pk_catalog_name", pa.utf8()),
        pa.field("pk_db_schema_name", pa.utf8()),
        pa.field("pk_table_name", pa.utf8(), nullable=False),
        pa.field("pk_column_name", pa.utf8(), nullable=False),
        pa.field("fk_catalog_name", pa.utf8()),
        pa.field("fk_db_schema_name", pa.utf8()),
        pa.field("fk_table_name", pa.utf8(), nullable=False),
        pa.field("fk_column_name", pa.utf8(), nullable=False),
        pa.field("key_sequence", pa.int32(), nullable=False),
        pa.field("fk_key_name", pa.utf8()),
        pa.field("pk_key_name", pa.utf8()),
        pa.field("update_rule", pa.uint8(), nullable=False),
        pa.field("delete_rule", pa.uint8(), nullable=False),
    ]
)
"""``CommandGetExportedKeys`` and ``CommandGetImportedKeys`` answer rows of this schema."""


def catalogs() -> pa.Table:
    return pa.Table.from_pydict({"catalog_name": [CATALOG]}, CATALOGS_SCHEMA)


def db_schemas(command: Any) -> pa.Table:
    """``CommandGetDbSchemas``: the datasets' schema and ``information_schema``, those its
    filters let through."""
    names = [
        name
        for name in (INFORMATION_SCHEMA, DB_SCHEMA)
        if _in_catalog(command) and _matches(command, "db_schema_filter_pattern", name)
    ]
    return pa.Table.from_pydict(
        {"catalog_name": [CATALOG] * len(names), "db_schema_name": names}, DB_SCHEMAS_SCHEMA
    )


def tables_schema(command: Any) -> pa.Schema:
    return TABLES_WITH_SCHEMA_SCHEMA if command.include_schema else TABLES_SCHEMA


def system_tables(command: Any) -> list[str]:
    """The ``information_schema`` views ``CommandGetTables`` lists, as its filters choose."""
    return [name for name in INFORMATION_SCHEMA_TABLES if _shows(command, INFORMATION_SCHEMA, name)]


def tables(command: Any, infos: Sequence[TableInfo], system: Sequence[TableInfo] = ()) -> pa.Table:
    """``CommandGetTables``: the ``system`` tables (the views :func:`system_tables` chose),
    then the datasets the caller may read that its filters let through, by name."""
    rows = [(INFORMATION_SCHEMA, SYSTEM_TABLE_TYPE, info) for info in system]
    rows += [
        (DB_SCHEMA, TABLE_TYPE, info)
        for info in sorted(infos, key=lambda info: info.name)
        if _shows(command, DB_SCHEMA, info.name)
    ]
    columns: dict[str, list[Any]] = {
        "catalog_name": [CATALOG] * len(rows),
        "db_schema_name": [schema for schema, _, _ in rows],
        "table_name": [info.name for _, _, info in rows],
        "table_type": [kind for _, kind, _ in rows],
    }
    if command.include_schema:
        columns["table_schema"] = [info.schema.serialize().to_pybytes() for _, _, info in rows]
    return pa.Table.from_pydict(columns, tables_schema(command))


def _shows(command: Any, schema: str, table: str) -> bool:
    """Whether ``CommandGetTables``'s filters let table ``schema.table`` through."""
    kind = TABLE_TYPE if schema == DB_SCHEMA else SYSTEM_TABLE_TYPE
    return (
        _in_catalog(command)
        and _matches(command, "db_schema_filter_pattern", schema)
        and _matches(command, "table_name_filter_pattern", table)
        and (not command.table_types or kind in command.table_types)
    )


def table_types() -> pa.Table:
    return pa.Table.from_pydict({"table_type": list(TABLE_TYPES)}, TABLE_TYPES_SCHEMA)


def no_keys(schema: pa.Schema) -> pa.Table:
    """The answer to a key command: none, as the reference answers (datasets declare no primary
    or foreign keys), whatever table it names."""
    return schema.empty_table()


def _in_catalog(command: Any) -> bool:
    """An omitted catalog filter matches; an empty one asks for tables without a catalog."""
    return not command.HasField("catalog") or command.catalog == CATALOG


def _matches(command: Any, name: str, value: str) -> bool:
    pattern = _pattern(command, name)
    return pattern is None or pattern.fullmatch(value) is not None


def _pattern(command: Any, name: str) -> re.Pattern[str] | None:
    """A Flight SQL filter pattern (``%`` any run, ``_`` any one character, ``\\`` escapes the
    next) as a regular expression; ``None`` when the command sets none."""
    if not command.HasField(name):
        return None
    text = getattr(command, name)
    parts = []
    escaped = False
    for char in text:
        if escaped:
            parts.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    if escaped:
        parts.append(re.escape("\\"))
    return re.compile("".join(parts), re.DOTALL)
