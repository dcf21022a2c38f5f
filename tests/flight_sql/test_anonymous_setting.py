"""``[server] flight_sql_allow_anonymous = false`` (kamu-cli's
``protocol.flight_sql.allow_anonymous``): a publisher refuses anonymous Flight SQL sessions in
the reference's words (the anonymous Basic credentials, ``anon_`` tokens) while tokens of the
node keep working; read from ``config.toml`` (or its environment variable) and, as every
``[server]`` setting, anew at each call (a daemon's reload flips it)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import kamu
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from odfd.app.node import Node
from odfd.config import load_config
from odfd.flight_sql import workspace_queries
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.flight_sql.test_protocol import Client, anonymous
from tests.flight_sql.test_reference_parity import basic, connect, tables_seen
from tests.verifier.builders import root_with_slices

TOKEN = "closed-reader-token"
NO_BASIC = (
    "Basic auth and anonymous access are not supported by this server. Users must "
    "authenticate via Bearer token auth mechanism."
)
RESTRICTED = "Anonymous account is restricted"
CONFIG = f"""\
[server]
read_tokens = ["{TOKEN}"]
private = ["secret.%"]
flight_sql_allow_anonymous = false
"""


@dataclass
class Closed:
    url: str
    nodes: list[Node]
    """The node in force, ``nodes[0]``, and one whose settings allow anonymous sessions (a
    test swaps them as a daemon's reload would)."""


@pytest.fixture(scope="module")
def closed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Closed]:
    root = tmp_path_factory.mktemp("flight-sql-closed") / "ws"

    async def serve(publish: Publish[Closed], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            await root_with_slices(workspace, "nums", [[1, 2, 3]])
            await root_with_slices(workspace, "secret.nums", [[7, 8]])
            path = Path(root) / "config.toml"
            path.write_text(CONFIG)
            config = load_config(path, env={})
            allowing = replace(config.server, flight_sql_allow_anonymous=True)
            nodes = [Node(workspace, config), Node(workspace, replace(config, server=allowing))]
            running = await workspace_queries.serve(
                nodes[0], address="127.0.0.1", port=0, current=lambda: nodes[0]
            )
            publish(Closed(running.url, nodes))
            try:
                await stop.wait()
            finally:
                await running.stop()

    with serve_in_thread("flight-sql-closed", serve) as served:
        yield served


def private_rows(connection: flightsql.Connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute('select count(*) from "secret.nums"')
        (row,) = cursor.fetchall()
    return int(row[0])


def test_the_setting_is_read_from_the_file_and_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    assert load_config(path, env={}).server.flight_sql_allow_anonymous is False
    assert load_config(None, env={}).server.flight_sql_allow_anonymous is True
    env = {"ODFD_SERVER_FLIGHT_SQL_ALLOW_ANONYMOUS": "true"}
    assert load_config(path, env=env).server.flight_sql_allow_anonymous is True


@pytest.mark.parametrize(
    ("user", "password"), [("anonymous", ""), ("anonymous", "anonymous"), ("kamu", "kamu")]
)
def test_the_anonymous_handshakes_are_refused(closed: Closed, user: str, password: str) -> None:
    with pytest.raises(flight.FlightUnauthenticatedError, match=NO_BASIC):
        flight.FlightClient(closed.url).authenticate_basic_token(user, password)
    with pytest.raises(adbc_driver_manager.Error, match=NO_BASIC):
        with basic(closed.url, user, password) as connection:
            tables_seen(connection)


def test_other_basic_credentials_get_the_same_refusal(closed: Closed) -> None:
    with pytest.raises(flight.FlightUnauthenticatedError, match=NO_BASIC):
        flight.FlightClient(closed.url).authenticate_basic_token("alice", "not-a-token")


def test_an_anonymous_session_token_is_refused(closed: Closed) -> None:
    made_up = Client(closed.url, "anon_MADEUPSESSIONTOKEN")
    with pytest.raises(flight.FlightUnauthenticatedError, match=RESTRICTED):
        made_up.query("select 1")


def test_tokens_of_the_node_keep_working(closed: Closed) -> None:
    header = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
    with connect(closed.url, **{header: f"Bearer {TOKEN}"}) as connection:  # kamu.connect(token=)
        assert private_rows(connection) == 2
    with basic(closed.url, "dbeaver-user", TOKEN) as connection:  # a token as the password
        assert private_rows(connection) == 2
    assert Client(closed.url, TOKEN).query("select count(*) as n from nums").to_pylist() == [
        {"n": 3}
    ]


def test_a_reload_turns_anonymous_sessions_on_and_off(closed: Closed) -> None:
    closed.nodes.reverse()
    try:
        session = anonymous(closed.url)
        assert session.query("select count(*) as n from nums").to_pylist() == [{"n": 3}]
        with pytest.raises(pa.ArrowKeyError, match="not found"):
            session.query('select * from "secret.nums"')
    finally:
        closed.nodes.reverse()
    with pytest.raises(flight.FlightUnauthenticatedError, match=RESTRICTED):
        session.query("select count(*) as n from nums")


def test_the_kamu_client_needs_a_token(closed: Closed, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kamu.connect`` without a token hands shake as 'anonymous': refused with the reference's
    words; with a token of the node (given, or ``KAMU_CLIENT_TOKEN``) it reads."""
    monkeypatch.delenv("KAMU_CLIENT_TOKEN", raising=False)
    with pytest.raises(adbc_driver_manager.Error, match=NO_BASIC):
        with kamu.connect(closed.url) as con:
            con.query("select 1 as value")
    with kamu.connect(closed.url, token=TOKEN) as con:
        assert con.query('select count(*) as n from "secret.nums"')["n"].tolist() == [2]
    monkeypatch.setenv("KAMU_CLIENT_TOKEN", TOKEN)
    with kamu.connect(closed.url) as con:
        assert con.query("select count(*) as n from nums")["n"].tolist() == [3]
