"""The catalog as tools browse it through ``information_schema`` (DBeaver, Tableau-style and ADBC
tools): listed by ``GetDbSchemas`` and ``GetTables`` as the reference lists it, queryable, and
showing only the datasets the caller may read (a private dataset does not leak through it)."""

from __future__ import annotations

from collections.abc import Iterator

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import pandas
import pyarrow as pa
import pytest

from odfd.flight_sql import catalog
from tests.flight_sql.conftest import READ_TOKEN, Node
from tests.flight_sql.test_protocol import Client, anonymous
from tests.flight_sql.test_reference_parity import basic, connect

DATASETS = "select table_name from information_schema.tables where table_schema = 'odf'"


@pytest.fixture
def client(node: Node) -> Iterator[Client]:
    connected = anonymous(node.url)
    yield connected
    connected.flight.close()


@pytest.fixture
def reader(node: Node) -> Iterator[flightsql.Connection]:
    header = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
    with connect(node.url, **{header: f"Bearer {READ_TOKEN}"}) as connection:
        yield connection


def rows(connection: flightsql.Connection, sql: str) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


def test_get_tables_lists_the_views_the_engine_has(client: Client) -> None:
    """The listed views are the engine's own (what ``information_schema.tables`` says of
    itself), each with the schema a query of it answers."""
    info = client.info(
        "CommandGetTables", db_schema_filter_pattern="information_schema", include_schema=True
    )
    listed = client.fetch(info).to_pylist()
    own = client.query(
        "select table_name, table_type from information_schema.tables "
        "where table_schema = 'information_schema' order by table_name"
    ).to_pylist()
    assert [(row["table_name"], row["table_type"]) for row in listed] == [
        (row["table_name"], row["table_type"]) for row in own
    ]
    assert {row["catalog_name"] for row in listed} == {catalog.CATALOG}
    for row in listed:
        schema = pa.ipc.read_schema(pa.py_buffer(row["table_schema"]))
        answer = client.query(f"select * from information_schema.{row['table_name']} limit 0")
        assert schema == answer.schema, row["table_name"]


def test_get_tables_filters_apply_to_information_schema(client: Client) -> None:
    info = client.info("CommandGetTables", table_name_filter_pattern="col%")
    found = client.fetch(info).to_pylist()
    assert [(row["db_schema_name"], row["table_name"]) for row in found] == [
        ("information_schema", "columns")
    ]
    datasets = client.fetch(client.info("CommandGetTables", table_types=["TABLE"]))
    assert set(datasets.column("db_schema_name").to_pylist()) == {"odf"}


def test_adbc_browses_information_schema_with_its_columns(node: Node) -> None:
    with basic(node.url, "anonymous", "") as connection:
        objects = connection.adbc_get_objects(db_schema_filter="information_schema").read_all()
    [schema] = objects.to_pylist()[0]["catalog_db_schemas"]
    tables = {table["table_name"]: table for table in schema["db_schema_tables"]}
    columns = [column["column_name"] for column in tables["columns"]["table_columns"]]
    assert {"table_catalog", "table_schema", "table_name", "column_name"} <= set(columns)


def test_a_private_dataset_does_not_leak_through_information_schema(
    node: Node, reader: flightsql.Connection
) -> None:
    with basic(node.url, "anonymous", "") as anonymous_connection:
        tables = {name for (name,) in rows(anonymous_connection, DATASETS)}
        columns = rows(
            anonymous_connection,
            "select distinct table_name from information_schema.columns where table_schema = 'odf'",
        )
        frame = pandas.read_sql(
            "select table_name, column_name from information_schema.columns "
            "where table_name = 'secret.nums'",
            anonymous_connection,
        )
    assert {"nums", "big", "kamu/covid19.cases"} <= tables
    assert "secret.nums" not in tables
    assert ("nums",) in columns and ("secret.nums",) not in columns
    assert frame.empty
    assert "secret.nums" in {name for (name,) in rows(reader, DATASETS)}
    secret_columns = rows(
        reader,
        "select column_name from information_schema.columns where table_name = 'secret.nums' "
        "order by ordinal_position",
    )
    assert [name for (name,) in secret_columns] == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "value",
    ]
