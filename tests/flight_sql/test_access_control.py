"""Flight SQL asks the node's one authorization decision: a bearer token (an issued account token
included) is the account it speaks for, and a dataset that account may not read does not exist
for it, neither in the table list nor in a query. Expired and revoked tokens are refused."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from odfd.app.accounts import add_account, create_token, revoke_token
from odfd.app.node import Node
from odfd.app.resources import apply_manifests, load_manifests
from odfd.config import NodeConfig, ServerConfig
from odfd.flight_sql import endpoint
from odfd.flight_sql.workspace_queries import NodeQueries, token_resolver
from storage.workspace import Workspace
from tests.flight_sql.test_protocol import Client, anonymous
from tests.verifier.builders import root_with_slices

RELATIONS = """\
$schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
headers:
  name: bob-shares
spec:
  relations:
    - {subject: 'Account:alice', relation: role, value: reader, object: 'Dataset:bob/secret'}
  attributes:
    - {object: 'Dataset:bob/secret', name: allowPublicRead, value: false}
    - {object: 'Dataset:bob/members', name: allowAnonymousRead, value: false}
"""


@dataclass
class Site:
    url: str
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("flight-sql-access") / "ws"
    started: list[Site] = []
    ready = threading.Event()
    stop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def serve() -> None:
        async with await Workspace.init(root) as workspace:
            node = Node(workspace, NodeConfig(server=ServerConfig()))
            for name in ("alice", "bob", "carol"):
                await add_account(node, name, password=None)
            for alias in ("bob/secret", "bob/members", "bob/open"):
                await root_with_slices(workspace, alias, [[1, 2, 3]])
            manifest = Path(root) / "relations.yaml"
            manifest.write_text(RELATIONS)
            await apply_manifests(workspace, load_manifests([manifest]))
            tokens = {n: (await create_token(node, n)).secret for n in ("alice", "carol")}
            expired = await create_token(node, "alice", lifetime=timedelta(seconds=-1))
            revoked = await create_token(node, "alice")
            await revoke_token(node, "alice", revoked.record.id)
            tokens |= {"expired": expired.secret, "revoked": revoked.secret}
            queries = NodeQueries(node)
            served = await endpoint.start(
                queries,
                address="127.0.0.1",
                port=0,
                resolve=token_resolver(workspace, node.config.server),
            )
            done = asyncio.Event()
            stop.append((asyncio.get_running_loop(), done))
            started.append(Site(served.url, tokens))
            ready.set()
            try:
                await done.wait()
            finally:
                await served.stop()
                queries.close()

    def run() -> None:
        try:
            asyncio.run(serve())
        finally:
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(120)
    assert started, "the Flight SQL server did not start"
    yield started[0]
    loop, done = stop[0]
    loop.call_soon_threadsafe(done.set)
    thread.join(60)


def tables(client: Client) -> set[str]:
    return set(client.fetch(client.info("CommandGetTables")).column("table_name").to_pylist())


def test_each_account_sees_what_the_decision_lets_it_read(site: Site) -> None:
    alice, carol = Client(site.url, site.tokens["alice"]), Client(site.url, site.tokens["carol"])
    assert tables(alice) == {"bob/secret", "bob/members", "bob/open"}
    assert tables(carol) == {"bob/members", "bob/open"}
    assert tables(anonymous(site.url)) == {"bob/open"}
    assert alice.query('SELECT count(*) AS n FROM "bob/secret"').column("n").to_pylist() == [3]
    for client, sql in (
        (carol, 'SELECT * FROM "bob/secret"'),
        (anonymous(site.url), 'SELECT * FROM "bob/members"'),
    ):
        with pytest.raises(pa.ArrowException, match="table 'bob/(secret|members)' not found"):
            client.query(sql)
    assert carol.query('SELECT count(*) AS n FROM "bob/members"').column("n").to_pylist() == [3]


@pytest.mark.parametrize("bad", ["expired", "revoked", "odfd_made-up"])
def test_expired_revoked_and_unknown_tokens_are_refused(site: Site, bad: str) -> None:
    token = site.tokens.get(bad, bad)
    with pytest.raises(flight.FlightUnauthenticatedError):
        Client(site.url, token).info("CommandGetTables")
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight.FlightClient(site.url).authenticate_basic_token("alice", token)
