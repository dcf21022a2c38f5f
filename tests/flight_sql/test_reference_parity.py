"""What kamu-cli's Flight SQL server does, done by odfd's, seen through the real clients: the
credentials its clients send (Basic ``anonymous``, the deprecated ``kamu``/``kamu``, a bearer
token, an anonymous session token it no longer knows), the commands it answers (keys, table
types, SqlInfo ids, a prepared statement's own ticket) and, for those it does not offer, its
status and its words (odfd's hint after them)."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from odfd.flight_sql import catalog, messages
from tests.flight_sql.conftest import READ_TOKEN, Node
from tests.flight_sql.test_protocol import Client, anonymous

TYPE_URL = f"type.googleapis.com/{messages.PACKAGE}."


def connect(url: str, **db_kwargs: str) -> flightsql.Connection:
    return flightsql.connect(url, db_kwargs=db_kwargs, autocommit=True)


def basic(url: str, user: str, password: str) -> flightsql.Connection:
    """A connection as the ADBC driver makes one from a user and password (a Basic handshake)."""
    return connect(
        url,
        **{
            adbc_driver_manager.DatabaseOptions.USERNAME.value: user,
            adbc_driver_manager.DatabaseOptions.PASSWORD.value: password,
        },
    )


def tables_seen(connection: flightsql.Connection) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("select table_name from information_schema.tables order by table_name")
        return [name for (name,) in cursor.fetchall()]


@pytest.fixture
def client(node: Node) -> Iterator[Client]:
    connected = anonymous(node.url)
    yield connected
    connected.flight.close()


def by_name(name: str, body: bytes = b"") -> bytes:
    """An ``Any`` of Flight SQL message ``name`` as a client sends it."""
    return any_pb2.Any(type_url=TYPE_URL + name, value=body).SerializeToString()


# --- credentials ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "password"), [("anonymous", ""), ("anonymous", "anonymous"), ("kamu", "kamu")]
)
def test_the_references_anonymous_credentials_open_an_anonymous_session(
    node: Node, user: str, password: str
) -> None:
    """``anonymous`` with no password (what ``kamu.connect`` sends without a token), with the
    password ``anonymous`` (clients that cannot send an empty one) and the deprecated
    ``kamu``/``kamu`` of older clients: each is an anonymous session, private datasets hidden."""
    header, value = flight.FlightClient(node.url).authenticate_basic_token(user, password)
    assert header == b"authorization" and value.startswith(b"Bearer anon_")
    with basic(node.url, user, password) as connection:
        seen = tables_seen(connection)
    assert "nums" in seen and "secret.nums" not in seen


def test_other_basic_credentials_are_refused_in_the_references_words(node: Node) -> None:
    for user, password in (("kamu", ""), ("anonymous", "x"), ("admin", "admin")):
        with pytest.raises(adbc_driver_manager.ProgrammingError) as raised:
            basic(node.url, user, password).close()
        assert "Basic auth is only supported for 'anonymous' accounts with no password." in str(
            raised.value
        )


def test_a_bearer_token_as_kamu_connect_sends_it(node: Node) -> None:
    """``kamu.connect(url, token=...)`` sets the driver's authorization header: no handshake."""
    header = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
    with connect(node.url, **{header: f"Bearer {READ_TOKEN}"}) as connection:
        assert "secret.nums" in tables_seen(connection)
    with pytest.raises(adbc_driver_manager.Error, match="Invalid access token"):
        with connect(node.url, **{header: "Bearer not-a-token"}) as connection:
            tables_seen(connection)


def test_an_anonymous_session_token_the_server_forgot_opens_a_new_session(node: Node) -> None:
    """As the reference: an ``anon_`` token (a session that expired, a server restarted) is
    anonymous, never more; its prepared statements are gone."""
    forgotten = Client(node.url, "anon_FORGOTTEN0123456789")
    assert forgotten.query("select count(*) as n from nums").column("n").to_pylist() == [5]
    with pytest.raises(pa.ArrowKeyError, match="table 'secret.nums' not found"):
        forgotten.query('select * from "secret.nums"')
    header = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
    with connect(node.url, **{header: "Bearer anon_ALSO-FORGOTTEN"}) as connection:
        seen = tables_seen(connection)
    assert "nums" in seen and "secret.nums" not in seen


@pytest.mark.parametrize(
    ("authorization", "words"),
    [
        (None, "authorization field not present"),
        (b"Digest abc", "Auth type not implemented: Digest ("),
        (b"Basic !!!", "authorization not parsable"),
        (b"Basic " + base64.b64encode(b"anonymous"), "Invalid authorization header"),
    ],
)
def test_a_handshake_without_usable_credentials_is_invalid_argument(
    node: Node, authorization: bytes | None, words: str
) -> None:
    headers = [] if authorization is None else [(b"authorization", authorization)]
    options = flight.FlightCallOptions(headers=headers)
    with pytest.raises(pa.ArrowInvalid, match=re.escape(words)):
        flight.FlightClient(node.url).authenticate(_NoPayload(), options)


class _NoPayload(flight.ClientAuthHandler):
    """Sends no payload: the credentials (if any) travel in the handshake's headers."""

    def authenticate(self, outgoing: object, incoming: object) -> None:
        return None

    def get_token(self) -> bytes:
        return b""


# --- commands the reference answers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("CommandGetPrimaryKeys", catalog.PRIMARY_KEYS_SCHEMA),
        ("CommandGetExportedKeys", catalog.KEYS_SCHEMA),
        ("CommandGetImportedKeys", catalog.KEYS_SCHEMA),
    ],
)
def test_key_commands_answer_no_keys_in_the_protocols_shape(
    client: Client, name: str, schema: pa.Schema
) -> None:
    info = client.info(name, table="nums")
    table = client.fetch(info)
    assert info.schema == table.schema == schema and table.num_rows == 0
    assert schema.field(0).name in ("catalog_name", "pk_catalog_name")
    assert [field.nullable for field in schema][-1] is False


def test_sql_info_answers_every_id_the_reference_answers(client: Client) -> None:
    reference = {0, 1, 2, 3, 4, 5, 8, 9, 100, 101, *range(500, 508), *range(513, 517)}
    reference |= {*range(518, 531), *range(532, 577)}
    table = client.fetch(client.info("CommandGetSqlInfo"))
    answered = set(table.column("info_name").to_pylist())
    assert reference <= answered
    values = dict(zip(table.column("info_name").to_pylist(), table.column("value"), strict=True))
    max_name = values[543]  # SQL_MAX_COLUMN_NAME_LENGTH: int64, in the union's bigint member
    assert max_name.type_code == 2 and max_name.as_py() == 2**31 - 1
    assert values[503].type_code == 3  # SQL_IDENTIFIER_CASE: an int32 ordinal


def test_a_prepared_statements_own_ticket_runs_it_with_its_parameters(client: Client) -> None:
    (created,) = client.action(
        "CreatePreparedStatement",
        "ActionCreatePreparedStatementRequest",
        query="select value from nums where value > $1 order by value",
    )
    handle = messages.unpack(created)[1].prepared_statement_handle
    command = messages.pack(
        messages.new("CommandPreparedStatementQuery", prepared_statement_handle=handle)
    )
    writer, _ = client.flight.do_put(
        flight.FlightDescriptor.for_command(command), pa.schema([("p", pa.int64())]), client.options
    )
    writer.write_table(pa.table({"p": [3]}))
    writer.close()
    table = client.flight.do_get(flight.Ticket(command), client.options).read_all()
    assert table.column("value").to_pylist() == [4, 5]


# --- what it does not offer: its status, its words -----------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("CommandGetCrossReference", "Implement get_flight_info_cross_reference"),
        ("CommandGetXdbcTypeInfo", "Implement get_flight_info_xdbc_type_info"),
        ("CommandStatementSubstraitPlan", "Implement get_flight_info_substrait_plan"),
        (
            "TicketStatementQuery",
            f"get_flight_info: The defined request is invalid: {TYPE_URL}TicketStatementQuery",
        ),
    ],
)
def test_flight_info_of_what_is_not_offered(client: Client, name: str, words: str) -> None:
    descriptor = flight.FlightDescriptor.for_command(by_name(name))
    with pytest.raises(pa.ArrowNotImplementedError, match=re.escape(words)):
        client.flight.get_flight_info(descriptor, client.options)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("CommandGetCrossReference", "Implement do_get_cross_reference"),
        ("CommandGetXdbcTypeInfo", "Implement do_get_xdbc_type_info"),
        (
            "CommandStatementQuery",
            f"do_get: The defined request is invalid: {TYPE_URL}CommandStatementQuery",
        ),
    ],
)
def test_tickets_of_what_is_not_offered(client: Client, name: str, words: str) -> None:
    with pytest.raises(pa.ArrowNotImplementedError, match=re.escape(words)):
        client.flight.do_get(flight.Ticket(by_name(name)), client.options).read_all()


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("CommandStatementUpdate", "Implement do_put_statement_update"),
        ("CommandPreparedStatementUpdate", "Implement do_put_prepared_statement_update"),
        ("CommandStatementSubstraitPlan", "Implement do_put_substrait_plan"),
        ("CommandStatementIngest", "do_put_statement_ingest has no default implementation"),
        ("CommandGetTables", f"do_put: The defined request is invalid: {TYPE_URL}CommandGetTables"),
    ],
)
def test_puts_of_what_is_not_offered(client: Client, name: str, words: str) -> None:
    descriptor = flight.FlightDescriptor.for_command(by_name(name))
    with pytest.raises(pa.ArrowNotImplementedError, match=re.escape(words)):
        writer, _ = client.flight.do_put(descriptor, pa.schema([]), client.options)
        writer.close()


@pytest.mark.parametrize(
    ("action", "words"),
    [
        ("BeginTransaction", "Implement do_action_begin_transaction"),
        ("EndTransaction", "Implement do_action_end_transaction"),
        ("BeginSavepoint", "Implement do_action_begin_savepoint"),
        ("EndSavepoint", "Implement do_action_end_savepoint"),
        ("CreatePreparedSubstraitPlan", "Implement do_action_create_prepared_substrait_plan"),
    ],
)
def test_actions_not_offered_are_unimplemented(client: Client, action: str, words: str) -> None:
    with pytest.raises(pa.ArrowNotImplementedError, match=re.escape(words)):
        list(client.flight.do_action(flight.Action(action, b""), client.options))


def test_an_unknown_action_is_invalid_argument_naming_the_offered_ones(client: Client) -> None:
    with pytest.raises(pa.ArrowInvalid) as raised:
        list(client.flight.do_action(flight.Action("Frobnicate", b""), client.options))
    text = str(raised.value)
    assert 'do_action: The defined request is invalid: "Frobnicate"' in text
    assert "CreatePreparedStatement" in text
    with pytest.raises(pa.ArrowNotImplementedError, match="Not yet implemented"):
        list(client.flight.list_flights(options=client.options))


def test_the_adbc_driver_reports_the_references_words(node: Node) -> None:
    """An update, a bulk ingest and a Substrait plan, as the ADBC driver sends them."""
    with basic(node.url, "anonymous", "") as connection:
        with connection.cursor() as cursor:
            cursor.adbc_statement.set_sql_query("insert into nums values (1)")
            with pytest.raises(adbc_driver_manager.NotSupportedError, match="do_put_statement_upd"):
                cursor.adbc_statement.execute_update()
        with connection.cursor() as cursor:
            with pytest.raises(adbc_driver_manager.NotSupportedError, match="do_put_statement_ing"):
                cursor.adbc_ingest("copy", pa.table({"x": [1]}), mode="create")
        with connection.cursor() as cursor:
            cursor.adbc_statement.set_substrait_plan(b"\x0a\x00")
            with pytest.raises(adbc_driver_manager.NotSupportedError, match="substrait_plan"):
                cursor.adbc_statement.execute_query()
        assert "nums" in tables_seen(connection)  # and the connection serves on
