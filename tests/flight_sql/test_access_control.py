"""Flight SQL asks the node's one authorization decision: a bearer token (an issued account token
included) is the account it speaks for, and a dataset that account may not read does not exist
for it, neither in the table list nor in a query. Expired and revoked tokens are refused.

The server keeps token subjects and plans while the node is unchanged; a token revoked, a token
that expires, a dataset made private (by a ``Relations`` resource or a settings reload) takes
effect on the very next call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from odfd.app.accounts import add_account, create_token, revoke_token
from odfd.app.node import Node
from odfd.app.resources import apply_manifests, load_manifests
from odfd.config import NodeConfig, ServerConfig
from odfd.flight_sql import endpoint
from odfd.flight_sql.workspace_queries import CatalogVersion, NodeQueries, token_resolver
from protocol.identity import DatasetAliasPattern
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.flight_sql.test_protocol import Client, anonymous
from tests.verifier.builders import root_with_slices

T = TypeVar("T")

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


ANONYMOUS_UNREADABLE = """\
$schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
headers:
  name: bob-hides-later
spec:
  attributes:
    - {object: 'Dataset:bob/later', name: allowAnonymousRead, value: false}
"""


@dataclass
class Site:
    url: str
    tokens: dict[str, str]
    node: Node
    loop: asyncio.AbstractEventLoop
    settings: list[ServerConfig] = field(default_factory=lambda: [ServerConfig()])
    """The server settings in force (a test replaces them as a daemon's reload would)."""

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` on the server's node, on its loop."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(60)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("flight-sql-access") / "ws"

    async def serve(publish: Publish[Site], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            node = Node(workspace, NodeConfig(server=ServerConfig()))
            for name in ("alice", "bob", "carol"):
                await add_account(node, name, password=None)
            for alias in ("bob/secret", "bob/members", "bob/open", "bob/later", "bob/reloaded"):
                await root_with_slices(workspace, alias, [[1, 2, 3]])
            manifest = Path(root) / "relations.yaml"
            manifest.write_text(RELATIONS)
            await apply_manifests(workspace, load_manifests([manifest]))
            tokens = {n: (await create_token(node, n)).secret for n in ("alice", "carol")}
            expired = await create_token(node, "alice", lifetime=timedelta(seconds=-1))
            revoked = await create_token(node, "alice")
            await revoke_token(node, "alice", revoked.record.id)
            tokens |= {"expired": expired.secret, "revoked": revoked.secret}
            settings = [node.config.server]
            queries = NodeQueries(node, lambda: settings[0])
            version = await CatalogVersion.open(workspace, lambda: settings[0])
            served = await endpoint.start(
                queries,
                address="127.0.0.1",
                port=0,
                resolve=token_resolver(workspace, lambda: settings[0]),
                version=version,
                release=version.close,
            )
            publish(Site(served.url, tokens, node, asyncio.get_running_loop(), settings))
            try:
                await stop.wait()
            finally:
                await served.stop()
                queries.close()

    with serve_in_thread("flight-sql-access", serve) as site:
        yield site


def tables(client: Client) -> set[str]:
    info = client.info("CommandGetTables", db_schema_filter_pattern="odf")
    return set(client.fetch(info).column("table_name").to_pylist())


def test_each_account_sees_what_the_decision_lets_it_read(site: Site) -> None:
    alice, carol = Client(site.url, site.tokens["alice"]), Client(site.url, site.tokens["carol"])
    everyone = {"bob/open", "bob/later", "bob/reloaded"}
    assert tables(alice) == {"bob/secret", "bob/members", *everyone}
    assert tables(carol) == {"bob/members", *everyone}
    assert tables(anonymous(site.url)) == everyone
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
    """In the reference Flight SQL's words: an expired token is told from an invalid one."""
    token = site.tokens.get(bad, bad)
    words = "Expired access token; " if bad == "expired" else "Invalid access token; "
    with pytest.raises(flight.FlightUnauthenticatedError, match=words):
        Client(site.url, token).info("CommandGetTables")
    handshake = words if bad == "expired" else "Basic auth is only supported for 'anonymous'"
    with pytest.raises(flight.FlightUnauthenticatedError, match=handshake):
        flight.FlightClient(site.url).authenticate_basic_token("alice", token)


def count(client: Client, alias: str) -> int:
    n: int = client.query(f'SELECT count(*) AS n FROM "{alias}"').column("n")[0].as_py()
    return n


def test_a_revoked_token_is_refused_on_its_next_call(site: Site) -> None:
    issued = site.run(create_token(site.node, "alice"))
    alice = Client(site.url, issued.secret)
    for _ in range(3):  # asked again: its subject (and the plan) are kept
        assert count(alice, "bob/secret") == 3
    site.run(revoke_token(site.node, "alice", issued.record.id))
    with pytest.raises(flight.FlightUnauthenticatedError):
        count(alice, "bob/secret")


def test_a_token_is_refused_once_it_expired(site: Site) -> None:
    lifetime = 1.0
    issued = site.run(create_token(site.node, "alice", lifetime=timedelta(seconds=lifetime)))
    created = time.monotonic()
    alice = Client(site.url, issued.secret)
    assert count(alice, "bob/secret") == 3
    time.sleep(max(0.0, lifetime - (time.monotonic() - created)) + 0.05)
    with pytest.raises(  # nothing changed but the time
        flight.FlightUnauthenticatedError, match="Expired access token"
    ):
        count(alice, "bob/secret")


def test_a_dataset_made_unreadable_is_gone_on_the_next_query(site: Site, tmp_path: Path) -> None:
    client = anonymous(site.url)
    for _ in range(3):
        assert count(client, "bob/later") == 3
    manifest = tmp_path / "hide.yaml"
    manifest.write_text(ANONYMOUS_UNREADABLE)
    site.run(apply_manifests(site.node.workspace, load_manifests([manifest])))
    with pytest.raises(pa.ArrowKeyError, match="table 'bob/later' not found"):
        count(client, "bob/later")
    assert "bob/later" not in tables(client)
    assert count(Client(site.url, site.tokens["carol"]), "bob/later") == 3


def test_a_dataset_made_private_by_a_reload_is_gone_on_the_next_query(site: Site) -> None:
    client = anonymous(site.url)
    for _ in range(3):
        assert count(client, "bob/reloaded") == 3
    before = site.settings[0]
    site.settings[0] = replace(before, private=(DatasetAliasPattern.parse("bob/reloaded"),))
    try:
        with pytest.raises(pa.ArrowKeyError, match="table 'bob/reloaded' not found"):
            count(client, "bob/reloaded")
    finally:
        site.settings[0] = before
    assert count(client, "bob/reloaded") == 3
