"""The Flight SQL protocol spoken directly with ``pyarrow.flight``: who may call, what each
command answers, and a clear gRPC status for every bad request, after which the server serves on.

Statuses are read as pyarrow's client raises them: INVALID_ARGUMENT as ``ArrowInvalid``,
NOT_FOUND as ``ArrowKeyError``, UNIMPLEMENTED as ``ArrowNotImplementedError``, the rest as
``Flight*Error``. No message carries the server's traceback.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from odfd.flight_sql import messages
from protocol.model import AddData
from storage.workspace import Workspace
from tests.flight_sql.conftest import ADMIN_TOKEN, BIG_ROWS, READ_TOKEN, Node
from tests.verifier.builders import root_with_slices, slice_table, write_slice

HEAVY = "select count(*) from range(0, 1000000000000)"
"""A query that keeps the engine busy far longer than any test waits."""
NO_BEARER = (
    "Unauthenticated access is not allowed. Provide a bearer token or use basic auth and "
    "handshake endpoint to login as anonymous."
)
BASIC_REFUSED = (
    "Basic auth is only supported for 'anonymous' accounts with no password. Authenticated "
    "users should use Bearer token auth mechanism."
)
UNKNOWN_STATEMENT = "Invalid plan token: no such prepared statement"
"""kamu-cli's Flight SQL refusals, which odfd's lead with."""


class Client:
    """A Flight SQL client over ``pyarrow.flight``: a bearer header on every call."""

    def __init__(self, url: str, token: str | None) -> None:
        self.flight = flight.FlightClient(url)
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self.options = flight.FlightCallOptions(headers=headers)

    def info(self, name: str, **fields: object) -> flight.FlightInfo:
        command = messages.pack(messages.new(name, **fields))
        return self.flight.get_flight_info(
            flight.FlightDescriptor.for_command(command), self.options
        )

    def fetch(self, info: flight.FlightInfo) -> pa.Table:
        (endpoint,) = info.endpoints
        return self.flight.do_get(endpoint.ticket, self.options).read_all()

    def query(self, sql: str) -> pa.Table:
        return self.fetch(self.info("CommandStatementQuery", query=sql))

    def action(self, kind: str, name: str, **fields: object) -> list[bytes]:
        body = messages.pack(messages.new(name, **fields))
        results = self.flight.do_action(flight.Action(kind, body), self.options)
        return [result.body.to_pybytes() for result in results]


def anonymous(url: str) -> Client:
    """A client that hands shake as 'anonymous' and carries the bearer token it is given."""
    client = flight.FlightClient(url)
    header, value = client.authenticate_basic_token("anonymous", "")
    assert header == b"authorization" and value.startswith(b"Bearer anon_")
    return Client(url, value.decode().removeprefix("Bearer "))


@pytest.fixture
def client(node: Node) -> Iterator[Client]:
    connected = anonymous(node.url)
    yield connected
    connected.flight.close()


def table_names(client: Client) -> list[str]:
    info = client.info("CommandGetTables", db_schema_filter_pattern="odf")
    return client.fetch(info).column("table_name").to_pylist()


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- who may call --------------------------------------------------------------------------------


def test_a_call_without_a_token_is_refused(node: Node) -> None:
    with pytest.raises(flight.FlightUnauthenticatedError, match=re.escape(NO_BEARER)):
        Client(node.url, None).query("select 1")


def test_an_unknown_bearer_token_is_refused(node: Node) -> None:
    with pytest.raises(
        flight.FlightUnauthenticatedError, match=r"Invalid access token; connect again with a"
    ):
        Client(node.url, "made-up").query("select 1")


def test_unknown_basic_credentials_are_refused(node: Node) -> None:
    """The reference's words first (it takes no other Basic credentials), then odfd's."""
    with pytest.raises(flight.FlightUnauthenticatedError, match=re.escape(BASIC_REFUSED)):
        flight.FlightClient(node.url).authenticate_basic_token("admin", "zzz")


def test_the_handshake_takes_unpadded_base64_as_the_go_driver_sends_it(node: Node) -> None:
    """``anonymous:`` is 10 bytes: base64 pads it with '=='; the Go ADBC driver leaves them out."""
    unpadded = base64.b64encode(b"anonymous:").rstrip(b"=")
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Basic " + unpadded)])
    received: list[str] = []

    class Received(flight.ClientMiddleware):
        def received_headers(self, headers: dict[str, list[str]]) -> None:
            received.extend(headers.get("authorization", []))

    class Capture(flight.ClientMiddlewareFactory):
        def start_call(self, info: flight.CallInfo) -> flight.ClientMiddleware:
            return Received()

    flight.FlightClient(node.url, middleware=[Capture()]).authenticate(_NoopAuth(), options)
    (authorization,) = received
    token = authorization.removeprefix("Bearer ")
    assert token.startswith("anon_")
    assert Client(node.url, token).query("select 1 as one").column("one").to_pylist() == [1]


class _NoopAuth(flight.ClientAuthHandler):
    """Sends no payload: the credentials travel in the handshake's headers."""

    def authenticate(self, outgoing: object, incoming: object) -> None:
        return None

    def get_token(self) -> bytes:
        return b""


def test_a_private_dataset_is_invisible_to_anonymous_and_visible_with_a_token(node: Node) -> None:
    assert "secret.nums" not in table_names(anonymous(node.url))
    with pytest.raises(pa.ArrowKeyError, match="table 'secret.nums' not found"):
        anonymous(node.url).query('select * from "secret.nums"')
    for token in (READ_TOKEN, ADMIN_TOKEN):
        reader = Client(node.url, token)
        assert "secret.nums" in table_names(reader)
        assert reader.query('select value from "secret.nums"').num_rows == 2


def test_basic_auth_with_a_token_as_password_answers_that_token(node: Node) -> None:
    """What a JDBC tool sends when it is given a user and a token as password."""
    header, value = flight.FlightClient(node.url).authenticate_basic_token("dbeaver", READ_TOKEN)
    assert value == f"Bearer {READ_TOKEN}".encode()
    assert "secret.nums" in table_names(Client(node.url, READ_TOKEN))


# --- what commands answer ------------------------------------------------------------------------


def test_the_announced_schema_is_the_stream_schema_nullability_included(client: Client) -> None:
    info = client.info(
        "CommandStatementQuery",
        query="select value, value is null as missing, 'x' as letter, event_time from nums",
    )
    table = client.fetch(info)
    assert info.schema == table.schema
    assert [field.nullable for field in table.schema] == [True, False, False, True]


def test_a_large_result_streams_in_many_batches(client: Client) -> None:
    info = client.info("CommandStatementQuery", query="select offset, value from big")
    (endpoint,) = info.endpoints
    reader = client.flight.do_get(endpoint.ticket, client.options)
    sizes = [chunk.data.num_rows for chunk in reader]
    assert sum(sizes) == BIG_ROWS and len(sizes) > 1 and max(sizes) <= 65_536


def test_tables_with_their_schemas(client: Client) -> None:
    info = client.info("CommandGetTables", include_schema=True, table_name_filter_pattern="nums")
    table = client.fetch(info)
    assert info.schema == table.schema and table.schema.field("table_schema").type == pa.binary()
    (row,) = table.to_pylist()
    schema = pa.ipc.read_schema(pa.py_buffer(row["table_schema"]))
    assert schema.names == ["offset", "op", "system_time", "event_time", "value"]
    assert (row["catalog_name"], row["db_schema_name"], row["table_type"]) == (
        "odf",
        "odf",
        "TABLE",
    )
    assert client.query("select count(*) as n from odf.odf.nums").column("n").to_pylist() == [5]


def test_catalogs_schemas_and_table_types(client: Client) -> None:
    assert client.fetch(client.info("CommandGetCatalogs")).to_pylist() == [{"catalog_name": "odf"}]
    schemas = client.fetch(client.info("CommandGetDbSchemas", db_schema_filter_pattern="o_f"))
    assert schemas.to_pylist() == [{"catalog_name": "odf", "db_schema_name": "odf"}]
    none = client.fetch(client.info("CommandGetDbSchemas", catalog=""))
    assert none.num_rows == 0  # an empty catalog filter asks for schemas without a catalog
    types = client.fetch(client.info("CommandGetTableTypes"))
    assert types.to_pylist() == [{"table_type": "TABLE"}, {"table_type": "VIEW"}]
    every = client.fetch(client.info("CommandGetDbSchemas")).column("db_schema_name")
    assert every.to_pylist() == ["information_schema", "odf"]  # ordered as the protocol says
    views = client.fetch(client.info("CommandGetTables", table_types=["VIEW"])).to_pylist()
    assert {(row["db_schema_name"], row["table_type"]) for row in views} == {
        ("information_schema", "VIEW")
    }  # every dataset is a TABLE


def test_sql_info(client: Client) -> None:
    info = client.info("CommandGetSqlInfo", info=[0, 3, 504, 9999])
    table = client.fetch(info)
    assert info.schema == table.schema
    assert table.to_pylist() == [
        {"info_name": 0, "value": "odfd"},
        {"info_name": 3, "value": True},
        {"info_name": 504, "value": '"'},
    ]


def test_a_prepared_statement_is_created_executed_and_closed(client: Client) -> None:
    (body,) = client.action(
        "CreatePreparedStatement", "ActionCreatePreparedStatementRequest", query="select 2 as two"
    )
    name, created = messages.unpack(body)
    assert name == "ActionCreatePreparedStatementResult"
    schema = pa.ipc.read_schema(pa.py_buffer(created.dataset_schema))
    assert schema == pa.schema([pa.field("two", pa.int64(), nullable=False)])
    handle = created.prepared_statement_handle
    for _ in range(2):
        info = client.info("CommandPreparedStatementQuery", prepared_statement_handle=handle)
        assert info.schema == schema and client.fetch(info).to_pylist() == [{"two": 2}]
    client.action(
        "ClosePreparedStatement",
        "ActionClosePreparedStatementRequest",
        prepared_statement_handle=handle,
    )
    with pytest.raises(flight.FlightUnauthenticatedError, match=UNKNOWN_STATEMENT):
        client.info("CommandPreparedStatementQuery", prepared_statement_handle=handle)


def test_a_prepared_statement_belongs_to_its_session(node: Node, client: Client) -> None:
    (body,) = client.action(
        "CreatePreparedStatement", "ActionCreatePreparedStatementRequest", query="select 1"
    )
    handle = messages.unpack(body)[1].prepared_statement_handle
    with pytest.raises(flight.FlightUnauthenticatedError, match=UNKNOWN_STATEMENT):
        anonymous(node.url).info("CommandPreparedStatementQuery", prepared_statement_handle=handle)


# --- bad requests --------------------------------------------------------------------------------


def test_bad_sql_is_invalid_argument_without_a_traceback(client: Client) -> None:
    with pytest.raises(pa.ArrowInvalid) as raised:
        client.query("selec 1")
    assert "Expected: an SQL statement, found: selec" in str(raised.value)
    assert "Traceback" not in str(raised.value) and ".py" not in str(raised.value)


def test_an_unknown_column_is_invalid_argument(client: Client) -> None:
    with pytest.raises(pa.ArrowInvalid, match="no_such_column"):
        client.query("select no_such_column from nums")


def test_an_unknown_table_is_not_found(client: Client) -> None:
    with pytest.raises(pa.ArrowKeyError, match="table 'Nums' not found") as raised:
        client.query('select * from "Nums"')  # names are case-sensitive
    assert "Traceback" not in str(raised.value)


def test_an_unknown_prepared_statement_handle_is_refused(client: Client) -> None:
    with pytest.raises(flight.FlightUnauthenticatedError, match=UNKNOWN_STATEMENT):
        client.info("CommandPreparedStatementQuery", prepared_statement_handle=b"made up")


def test_a_failing_query_is_invalid_argument(client: Client) -> None:
    with pytest.raises(pa.ArrowInvalid, match="Divide by zero"):
        client.query("select value / (value - value) as boom from nums")


def test_malformed_commands_and_tickets_are_invalid_argument(client: Client) -> None:
    with pytest.raises(pa.ArrowInvalid, match="not a protobuf Any"):
        client.flight.get_flight_info(
            flight.FlightDescriptor.for_command(b"\xff\xff"), client.options
        )
    with pytest.raises(pa.ArrowInvalid, match="path"):
        client.flight.get_flight_info(flight.FlightDescriptor.for_path("nums"), client.options)
    forged = messages.pack(messages.new("TicketStatementQuery", statement_handle=b"not json"))
    with pytest.raises(pa.ArrowInvalid, match="not one this server issued"):
        client.flight.do_get(flight.Ticket(forged), client.options).read_all()


def test_a_query_past_its_time_limit_is_stopped_with_deadline_exceeded(node: Node) -> None:
    client = anonymous(node.strict_url)
    started = time.monotonic()
    with pytest.raises(flight.FlightTimedOutError, match="time limit of 1 s"):
        client.query(HEAVY)
    assert time.monotonic() - started < 10
    assert node.queries.wait_all_closed(10)
    assert _engine_idles()
    assert client.query("select 1 as one").num_rows == 1  # and the server serves on


def test_a_client_that_goes_away_cancels_its_query(node: Node, client: Client) -> None:
    info = client.info("CommandStatementQuery", query=HEAVY)
    (endpoint,) = info.endpoints
    impatient = flight.FlightCallOptions(headers=client.options.headers, timeout=0.5)
    with pytest.raises(flight.FlightTimedOutError):
        client.flight.do_get(endpoint.ticket, impatient).read_all()
    assert node.queries.wait_all_closed(10)
    assert _engine_idles()


def test_cancel_flight_info_stops_a_running_query_and_its_ticket(node: Node) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.flight_sql.cancelling_client", node.url, HEAVY],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        check=True,
    )
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome["answers"] == [messages.CANCELLED, messages.CANCELLED]
    assert outcome["running"].startswith("cancelled") and outcome["later"].startswith("cancelled")
    assert node.queries.wait_all_closed(10)
    assert _engine_idles()


def test_cancel_query_answers_for_tickets_it_knows(client: Client) -> None:
    info = client.info("CommandStatementQuery", query="select 1 as one")
    (answer,) = client.action("CancelQuery", "ActionCancelQueryRequest", info=info.serialize())
    assert messages.unpack(answer)[1].result == messages.CANCELLED
    catalogs = client.info("CommandGetCatalogs")
    (answer,) = client.action("CancelQuery", "ActionCancelQueryRequest", info=catalogs.serialize())
    assert messages.unpack(answer)[1].result == messages.NOT_CANCELLABLE
    with pytest.raises(pa.ArrowInvalid, match="no FlightInfo"):
        client.action("CancelQuery", "ActionCancelQueryRequest", info=b"\xff")
    again = client.info("CommandStatementQuery", query="select 1 as one")
    assert client.fetch(again).column("one").to_pylist() == [1]  # each ticket is its own


def test_binding_parameters_checks_the_statement_and_the_rows(client: Client) -> None:
    (created,) = client.action(
        "CreatePreparedStatement", "ActionCreatePreparedStatementRequest", query="select $1 as v"
    )
    handle = messages.unpack(created)[1].prepared_statement_handle
    rows = pa.table({"p": [1, 2]})

    def bind(statement: bytes, table: pa.Table) -> None:
        command = messages.pack(
            messages.new("CommandPreparedStatementQuery", prepared_statement_handle=statement)
        )
        writer, _ = client.flight.do_put(
            flight.FlightDescriptor.for_command(command), table.schema, client.options
        )
        writer.write_table(table)
        writer.close()

    with pytest.raises(pa.ArrowInvalid, match="one row of parameters"):
        bind(handle, rows)
    with pytest.raises(flight.FlightUnauthenticatedError, match=UNKNOWN_STATEMENT):
        bind(b"unknown", rows.slice(0, 1))
    bind(handle, rows.slice(1, 1))
    info = client.info("CommandPreparedStatementQuery", prepared_statement_handle=handle)
    assert client.fetch(info).column("v").to_pylist() == [2]


def _engine_idles() -> bool:
    """This process (the server's) spends well under one core for a second: a query that kept
    running would spend a whole one."""
    before = cpu_seconds()
    time.sleep(1.0)
    return cpu_seconds() - before < 0.5


def test_many_concurrent_sessions(node: Node) -> None:
    def session(number: int) -> list[int]:
        client = anonymous(node.url)
        total = client.query(f"select sum(value) + {number} as s from big").column("s")
        return total.to_pylist()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(session, range(32)))
    expected = BIG_ROWS * (BIG_ROWS - 1) // 2
    assert results == [[expected + number] for number in range(32)]
    assert threading.active_count() < 200


def test_datasets_written_while_serving_are_read_at_their_new_heads(
    node: Node, client: Client
) -> None:
    """The server keeps its tables between queries; a dataset that appears or moves (written
    here through a workspace of this test's own) is read as it is now."""
    alias = "late.nums"

    async def create() -> None:
        async with await Workspace.open(node.root) as workspace:
            await root_with_slices(workspace, alias, [[10, 20]])

    async def append() -> None:
        async with await Workspace.open(node.root) as workspace:
            record = await workspace.try_resolve(alias)
            assert record is not None
            dataset = workspace.open_dataset(record.id)
            state = await dataset.chain.state()
            path = node.root / "staging" / "late-append.parquet"
            data_slice = write_slice(slice_table(2, [30]), path)
            event = AddData(
                prev_offset=state.last_offset,
                new_data=data_slice,
                new_watermark=state.last_watermark,
            )
            await dataset.commit_data(event, data_file=path, expected_head=state.head)

    total = f'select sum(value) as s, count(*) as n from "{alias}"'
    with pytest.raises(pa.ArrowKeyError, match="not found"):
        client.query(total)
    asyncio.run(create())
    assert alias in table_names(client)
    assert client.query(total).to_pylist() == [{"s": 30, "n": 2}]
    answered = client.info("CommandStatementQuery", query=total)
    [created] = client.action(
        "CreatePreparedStatement", "ActionCreatePreparedStatementRequest", query=total
    )
    handle = messages.unpack(created)[1].prepared_statement_handle
    asyncio.run(append())
    assert client.query(total).to_pylist() == [{"s": 60, "n": 3}]
    # a FlightInfo answered before is the datasets as they were then (its plan was kept) ...
    assert client.fetch(answered).to_pylist() == [{"s": 30, "n": 2}]
    # ... and its ticket fetched again is planned anew; a prepared statement reads them now
    assert client.fetch(answered).to_pylist() == [{"s": 60, "n": 3}]
    prepared = client.info("CommandPreparedStatementQuery", prepared_statement_handle=handle)
    assert client.fetch(prepared).to_pylist() == [{"s": 60, "n": 3}]


def test_an_anonymous_unknown_table_says_a_token_reads_private_ones_whatever_the_name(
    node: Node,
) -> None:
    """The same words for a private dataset's name and for no dataset's: which one it was is
    never told; the status stays NOT_FOUND; a caller with a token gets no such hint."""
    said = []
    for sql in ("select * from secret.nums", 'select * from "secret.nums"', "select * from nope"):
        with pytest.raises(pa.ArrowKeyError) as raised:
            anonymous(node.url).query(sql)
        text = str(raised.value)
        assert "this session is anonymous: a private dataset is a table only for a token" in text
        assert "kamu.connect(URL, token=TOKEN)" in text
        said.append(text.split("not found", 1)[1])
    assert said[0] == said[1] == said[2]
    with pytest.raises(pa.ArrowKeyError) as raised:
        Client(node.url, READ_TOKEN).query("select * from nope")
    assert "anonymous" not in str(raised.value)
