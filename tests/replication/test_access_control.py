"""The spec's auth example on a served node: alice (maintainer of ``bob/bobs-dataset``) may push
to and ingest into it, carol (no role) gets 403 while it is publicly readable and 404 once it is
not, anonymous clients get what ``allowAnonymousRead`` says, and expired or revoked tokens are
refused on every way in. ``odfd access`` explains each answer."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pyarrow as pa
import pytest

from odfd.app.access import access_report
from odfd.app.accounts import add_account, create_token, revoke_token
from odfd.app.authorization import Action
from odfd.app.controllers import Reconciler
from odfd.app.node import Node
from odfd.app.resource_service import reconcile_here
from odfd.app.resources import apply_manifests, load_manifests
from odfd.config import NodeConfig, ServerConfig, SyncConfig
from odfd.console.api import console_mount
from odfd.console.backend import WorkspaceBackend
from odfd.flight_sql import endpoint
from odfd.flight_sql.workspace_queries import NodeQueries, token_resolver
from odfd.server.app import Mount, running
from odfd.server.ingest_api import IngestApi
from odfd.server.query_api import platform, query_api_mount
from odfd.server.query_api.platform import LoginThrottle
from odfd.server.resource_api.handlers import ResourceApi
from odfd.server.source_api import SourceApi
from odfd.sources.buffers import SourceBuffers
from odfd.sync.errors import AccessDeniedError, SyncError
from odfd.sync.push import PushOptions, push
from storage.workspace import Workspace
from tests.flight_sql.test_protocol import Client, anonymous
from tests.replication.datagen import create_root

EXAMPLE = Path(__file__).parents[1] / "fixtures" / "spec_examples" / "auth-accounts-permissions"
DATASET = "bob/bobs-dataset"
ALICE_PASSWORD = "swordfish"
"""alice's plain password in the spec's example."""
PRIVATE_RELATIONS = """\
$schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
headers:
  name: alice-bob
spec:
  relations:
    - {subject: {type: Account, name: alice}, relation: role, value: maintainer,
       object: 'Dataset:bob/bobs-dataset'}
  attributes:
    - {object: 'Dataset:bob/bobs-dataset', name: allowPublicRead, value: false}
"""


@dataclass
class Site:
    url: str
    http: aiohttp.ClientSession
    node: Node
    tokens: dict[str, str]
    last: str = ""
    writer: Any = None

    async def get(self, path: str, who: str | None) -> int:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens.get(who, who)}"}
        async with self.http.get(self.url + path, headers=headers) as response:
            await response.read()
            return response.status

    async def listed(self, who: str | None) -> set[str]:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}
        async with self.http.get(self.url, headers=headers) as response:
            return {d["alias"] for d in (await response.json())["datasets"]}

    async def query(self, who: str | None) -> int:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens.get(who, who)}"}
        body = {"query": f'SELECT count(*) AS n FROM "{DATASET}"'}
        async with self.http.post(self.url + "query", json=body, headers=headers) as response:
            await response.read()
            return response.status

    async def call(self, method: str, path: str, who: str | None, body: bytes = b"") -> int:
        headers = {} if who is None else {"Authorization": f"Bearer {self.tokens.get(who, who)}"}
        if body:
            headers["Content-Type"] = "application/json"
        async with self.http.request(
            method, self.url + path, headers=headers, data=body or None
        ) as response:
            self.last = await response.text()
            return response.status

    async def ingest(self, who: str) -> int:
        headers = {
            "Authorization": f"Bearer {self.tokens.get(who, who)}",
            "Content-Type": "application/json",
        }
        async with self.http.post(
            f"{self.url}{DATASET}/ingest", data=b"", headers=headers
        ) as response:
            self.last = await response.text()
            return response.status


@pytest.fixture
async def site(node_a: Workspace, node_b: Workspace) -> AsyncIterator[Site]:
    server = ServerConfig(
        address="127.0.0.1",
        port=0,
        push_tokens=frozenset({TOKEN_LISTS["push"]}),
        read_tokens=frozenset({TOKEN_LISTS["read"]}),
        admin_tokens=frozenset({TOKEN_LISTS["admin"]}),
    )
    node = Node(node_a, NodeConfig(server=server))
    for name in ("bob", "carol"):
        await add_account(node, name, password=None)
    manifests = [
        m
        for m in load_manifests(sorted(EXAMPLE.glob("*.yaml")))
        if not m.name.endswith("bobs-dataset")  # bob pushes it (below)
    ]
    await apply_manifests(node_a, manifests)
    await Reconciler(node_a, SyncConfig()).reconcile_all()
    tokens = {name: (await create_token(node, name)).secret for name in ("alice", "bob", "carol")}
    expired = await create_token(node, "alice", lifetime=timedelta(seconds=-1))
    revoked = await create_token(node, "alice")
    await revoke_token(node, "alice", revoked.record.id)
    tokens |= {"expired": expired.secret, "revoked": revoked.secret}
    mounts: list[Mount] = [
        query_api_mount(node),
        IngestApi(lambda: node),
        console_mount(WorkspaceBackend(node)),
        ResourceApi(lambda: node, reconcile_here(node)),
        SourceApi(lambda: node, SourceBuffers()),
    ]
    async with running(node_a, server, mounts=mounts) as served, aiohttp.ClientSession() as http:
        site = Site(served.url, http, node, tokens)
        site.writer = await create_root(node_b, "cities", slices=1)
        await push(node_b, "cities", served.url + DATASET, options=PushOptions(token=tokens["bob"]))
        yield site


async def test_roles_decide_every_way_in(site: Site, node_a: Workspace, node_b: Workspace) -> None:
    head = f"{DATASET}/refs/head"
    # allowPublicRead: true, allowAnonymousRead: false
    assert [await site.get(head, who) for who in ("alice", "bob", "carol", None)] == [
        200,
        200,
        200,
        404,
    ]
    assert DATASET in await site.listed("carol") and DATASET not in await site.listed(None)
    assert await site.query("carol") == 200 and await site.query(None) != 200
    for bad in ("expired", "revoked", "odfd_made-up"):
        assert await site.get(head, bad) == 401
        assert await site.query(bad) == 401
        assert await site.ingest(bad) == 401
    # alice (maintainer) may write; carol may read but not write: 403 on ingest and push.
    # Authorised: what stops alice is that bob's dataset has no push source.
    assert await site.ingest("alice") == 400 and "no push source" in site.last
    assert await site.ingest("carol") == 403
    url = site.url + DATASET
    await site.writer.append(slices=1)
    with pytest.raises(AccessDeniedError, match="403"):
        await push(node_b, "cities", url, options=PushOptions(token=site.tokens["carol"]))
    with pytest.raises(AccessDeniedError, match="401"):
        await push(node_b, "cities", url, options=PushOptions(token=site.tokens["revoked"]))
    pushed = await push(node_b, "cities", url, options=PushOptions(token=site.tokens["alice"]))
    assert pushed.num_blocks == 1
    # A push creates a dataset only under the pusher's own account.
    await create_root(node_b, "towns", slices=1)
    with pytest.raises(AccessDeniedError):
        await push(
            node_b,
            "towns",
            site.url + "bob/other",
            options=PushOptions(token=site.tokens["carol"]),
        )
    created = await push(
        node_b, "towns", site.url + "carol/towns", options=PushOptions(token=site.tokens["carol"])
    )
    assert created.num_blocks > 0

    report = await access_report(site.node, DATASET)
    rows = {row.who: row for row in report.rows}
    assert rows["alice"].allowed == (Action.READ, Action.WRITE, Action.MAINTAIN)
    assert "maintainer of the dataset (Relations alice-bob)" in rows["alice"].reason
    assert (
        rows["carol"].allowed == (Action.READ,)
        and "allowPublicRead is true" in rows["carol"].reason
    )
    assert rows["(anonymous)"].allowed == ()

    # Not publicly readable any more: carol cannot even see it.
    (node_a.root / "private.yaml").write_text(PRIVATE_RELATIONS)
    await apply_manifests(node_a, load_manifests([node_a.root / "private.yaml"]))
    assert await site.get(head, "carol") == 404
    assert await site.query("carol") != 200
    assert await site.ingest("carol") == 404
    assert DATASET not in await site.listed("carol") and DATASET in await site.listed("alice")
    assert await site.get(head, "alice") == 200
    assert json.dumps(rows["alice"].reason)  # reasons are plain text


READINGS_SOURCE = """\
$schema: https://opendatafabric.org/schemas/source/v1alpha1/Source
headers:
  name: readings
  account: {name: bob}
spec:
  ingress: {kind: RestEndpoint}
  read:
    kind: NdJson
    schema:
      fields:
        - {name: v, type: Int64}
"""
READINGS_SOURCE_JSON = json.dumps(
    {
        "headers": {"name": "readings"},
        "spec": {
            "ingress": {"kind": "RestEndpoint"},
            "read": {"kind": "NdJson", "schema": {"fields": [{"name": "v", "type": "Int64"}]}},
        },
    }
).encode()


@pytest.fixture
async def flight_url(site: Site) -> AsyncIterator[str]:
    """Flight SQL of the site's node, asking the same decision."""
    queries = NodeQueries(site.node)
    served = await endpoint.start(
        queries,
        address="127.0.0.1",
        port=0,
        resolve=token_resolver(site.node.workspace, site.node.config.server),
    )
    try:
        yield served.url
    finally:
        await served.stop()
        queries.close()


async def _pushes(source: Workspace, url: str, token: str, *, force: bool = False) -> bool:
    """Whether a Smart Transfer push of ``cities`` to ``url`` is taken (a refused forced push
    is ended inside the protocol, after the upgrade: a transfer error, not a 403)."""
    try:
        await push(source, "cities", url, options=PushOptions(force=force, token=token))
    except SyncError:
        return False
    return True


def _flight_query(url: str, token: str | None) -> bool:
    """Whether a Flight SQL query of the dataset answers (a refusal: "table not found")."""
    client = Client(url, token) if token is not None else anonymous(url)
    try:
        client.query(f'SELECT count(*) AS n FROM "{DATASET}"')
    except pa.ArrowException:
        return False
    return True


ROLES_YAML = """\
$schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
headers:
  name: roles
spec:
  relations:
    - {subject: 'Account:dan', relation: role, value: reader, object: 'Dataset:bob/bobs-dataset'}
    - {subject: 'Account:erin', relation: role, value: editor, object: 'Dataset:bob/bobs-dataset'}
"""
TABLE = Path(__file__).parents[2] / "docs" / "access-control.md"
TABLE_START = "<!-- generated by tests/replication/test_access_control.py: do not edit -->"
TABLE_END = "<!-- end of generated table -->"
ROLE_ROWS = {
    "anonymous": None,
    "signed-in, no role": "carol",
    "reader": "dan",
    "editor": "erin",
    "maintainer": "alice",
    "owner": "bob",
    "node admin": "root",
}


async def test_the_docs_table_says_what_each_role_may_do_on_each_way_in(
    site: Site, flight_url: str, node_a: Workspace, node_b: Workspace
) -> None:
    """Each way in × each role on ``bob/bobs-dataset`` (publicly but not anonymously readable),
    asked of the served node; the table in docs/access-control.md must say the same
    (``ODFD_WRITE_ACCESS_TABLE=1`` rewrites it)."""
    for name in ("dan", "erin"):
        await add_account(site.node, name, password=None)
    await add_account(site.node, "root", password=None, is_admin=True)
    for name in ("dan", "erin", "root"):
        site.tokens[name] = (await create_token(site.node, name)).secret
    (node_a.root / "roles.yaml").write_text(ROLES_YAML)
    await apply_manifests(node_a, load_manifests([node_a.root / "roles.yaml"]))
    (node_a.root / "source.yaml").write_text(READINGS_SOURCE)
    await apply_manifests(node_a, load_manifests([node_a.root / "source.yaml"]))
    head = f"{DATASET}/refs/head"
    ways = (
        "Simple Transfer pull (`GET refs/head`)",
        "dataset listing (`GET /`)",
        "query API (`POST /query`)",
        "console (`GET /ui/api/datasets/…`)",
        "console SQL box (`POST /ui/api/sql`)",
        "Flight SQL query",
        "HTTP ingest (`POST …/ingest`)",
        "Smart Transfer push",
        "Smart Transfer forced push",
        "resource protocol: list bob's resources",
        "resource protocol: apply in bob's account",
        "RestEndpoint Source of bob (`POST /bob/source/…/ingest`)",
        "console Resources page: bob's Source shown",
    )
    sql = json.dumps({"query": f'SELECT count(*) AS n FROM "{DATASET}"'}).encode()
    rows = []
    for role, who in ROLE_ROWS.items():
        pull = await site.get(head, who) == 200
        listed = DATASET in await site.listed(who)
        query = await site.query(who) == 200
        console = await site.call("GET", f"ui/api/datasets/{quote(DATASET, safe='')}", who) == 200
        console_sql = await site.call("POST", "ui/api/sql", who, sql) == 200
        token = None if who is None else site.tokens[who]
        flight_sql = await asyncio.to_thread(_flight_query, flight_url, token)
        ingest = who is not None and await site.ingest(who) not in (401, 403, 404)
        pushed = forced = False
        if who is not None:
            # A refused push leaves its block for the next role.
            await site.writer.append(slices=1)
            pushed = await _pushes(node_b, site.url + DATASET, site.tokens[who])
            await site.writer.append(slices=1)
            forced = await _pushes(node_b, site.url + DATASET, site.tokens[who], force=True)
        resources = await site.call("GET", "source/v1alpha1/source?account=bob", who) == 200
        applied = await site.call(
            "POST", "source/v1alpha1/source?account=bob", who, READINGS_SOURCE_JSON
        )
        posted = await site.call("POST", "bob/source/readings/ingest", who, b'{"v": 1}')
        shown = await site.call("GET", "ui/api/resources", who) == 200 and any(
            r["name"].endswith("readings") for r in json.loads(site.last)["resources"]
        )
        rows.append(
            (
                role,
                (
                    pull,
                    listed,
                    query,
                    console,
                    console_sql,
                    flight_sql,
                    ingest,
                    pushed,
                    forced,
                    resources,
                    applied in (200, 201),
                    posted == 202,
                    shown,
                ),
            )
        )
    table = "\n".join(
        [
            TABLE_START,
            "| role | " + " | ".join(ways) + " |",
            "|---|" + "---|" * len(ways),
            *(
                f"| {role} | " + " | ".join("allowed" if a else "—" for a in allowed) + " |"
                for role, allowed in rows
            ),
            TABLE_END,
        ]
    )
    expected = dict(rows)
    reads, of_bob, nothing = (True,) * 6, (True,) * 4, (False,) * 4
    assert expected["anonymous"] == (False,) * 9 + nothing
    assert expected["signed-in, no role"] == expected["reader"] == reads + (False,) * 3 + nothing
    assert expected["editor"] == reads + (True, True, False) + nothing
    assert expected["maintainer"] == reads + (True,) * 3 + nothing
    assert expected["owner"] == expected["node admin"] == reads + (True,) * 3 + of_bob
    text = TABLE.read_text()
    generated = text[text.index(TABLE_START) : text.index(TABLE_END) + len(TABLE_END)]
    if os.environ.get("ODFD_WRITE_ACCESS_TABLE"):
        TABLE.write_text(text.replace(generated, table))
    else:
        assert generated == table, "docs/access-control.md is stale: ODFD_WRITE_ACCESS_TABLE=1"


async def test_tokens_never_reach_logs_or_answers(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused token, a token put in a URL and a revoked one are neither logged nor echoed."""
    caplog.set_level(logging.DEBUG)
    secrets = [site.tokens["revoked"], site.tokens["carol"], "odfd_guessed-token-text"]
    answers = []
    for secret in secrets:
        headers = {"Authorization": f"Bearer {secret}"}
        for path in (
            f"{DATASET}/refs/head?token={secret}",
            f"query?access_token={secret}",
            f"{DATASET}/ingest?uploadToken={secret}",
            f"{DATASET}/data/x?scope=s&size=1&expires=1&signature={secret}",
        ):
            async with site.http.get(site.url + path, headers=headers) as response:
                answers.append(await response.text())
    assert await site.ingest("revoked") == 401
    answers.append(site.last)
    for secret in secrets:
        assert secret not in caplog.text
        assert not any(secret in answer for answer in answers)


TOKEN_LISTS = {
    "push": "a-push-list-token",
    "read": "a-read-list-token",
    "admin": "an-admin-list-token",
}
_LIST_COMPARE = re.compile(
    r"\b(in|not in|==|!=)\s+[\w.]*(push|read|admin)_tokens\b"
    r"|\b[\w.]*(push|read|admin)_tokens\s*(==|!=)"
    r"|\btoken\s*(==|!=)\s*[\w.]*token\b"
)


async def test_token_lists_are_compared_timing_safe(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``[server]`` list token is compared with ``hmac.compare_digest`` against every listed
    token, whichever matches (or none); an issued token is found by its hash, never compared;
    and no token list is searched with ``in`` or ``==`` anywhere in the node."""
    compared: list[bytes] = []
    real = hmac.compare_digest

    def spy(given: Any, known: Any) -> bool:
        compared.append(known)
        return real(given, known)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    every = {t.encode() for t in TOKEN_LISTS.values()}
    for token in (TOKEN_LISTS["read"], "a-guessed-token"):
        compared.clear()
        status = await site.get(f"{DATASET}/refs/head", token)
        assert status == (200 if token == TOKEN_LISTS["read"] else 401)
        assert every <= set(compared)
    compared.clear()
    assert await site.get(f"{DATASET}/refs/head", "alice") == 200
    assert not any(c.startswith(b"odfd_") for c in compared)
    root = Path(__file__).parents[2] / "odfd"
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _LIST_COMPARE.search(line)
    ]
    assert found == []


async def test_passwords_never_reach_logs_answers_or_get(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """alice's password (the spec example's plain ``swordfish``, applied as an ``Account``):
    a wrong and a right login, and the account read back over the resource protocol, never
    show it."""
    caplog.set_level(logging.DEBUG)
    await add_account(site.node, "ops", password=None, is_admin=True)
    site.tokens["ops"] = (await create_token(site.node, "ops")).secret
    answers = []
    for password, status in (("swordfish-guess", 401), (ALICE_PASSWORD, 200)):
        credentials = json.dumps({"login": "alice", "password": password})
        body = {"loginMethod": "password", "loginCredentialsJson": credentials}
        async with site.http.post(site.url + "platform/login", json=body) as response:
            answers.append(await response.text())
            assert response.status == status
    assert await site.call("GET", "auth/v1alpha1/account/alice?account=kamu", "ops") == 200
    answers.append(site.last)
    assert await site.call("GET", "auth/v1alpha1/account?account=kamu", "ops") == 200
    answers.append(site.last)
    assert "alice" in answers[-1]
    for secret in (ALICE_PASSWORD, "swordfish-guess"):
        assert secret not in caplog.text
        assert not any(secret in answer for answer in answers)


async def test_failed_logins_slow_later_attempts(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After 3 failures for a name each attempt waits 0.5 s doubled per failure, at most 8 s;
    other names are not slowed; a success or 15 quiet minutes forget them (an injected clock:
    nothing sleeps)."""
    now = [1_000.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    delays = []
    for _ in range(9):
        delays.append(throttle.delay("alice"))
        throttle.failed("alice")
    assert delays == [0, 0, 0, 0.5, 1, 2, 4, 8, 8]
    assert throttle.delay("bob") == 0
    now[0] += 901
    assert throttle.delay("alice") == 0
    for _ in range(4):
        throttle.failed("alice")
    throttle.succeeded("alice")
    assert throttle.delay("alice") == 0
    # The login route waits as its throttle says before it checks the password.
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(platform.asyncio, "sleep", sleep)
    for _ in range(5):
        credentials = json.dumps({"login": "carol", "password": "guess"})
        body = {"loginMethod": "password", "loginCredentialsJson": credentials}
        async with site.http.post(site.url + "platform/login", json=body) as response:
            assert response.status == 401
    assert waited == [0.5, 1.0]


async def test_a_token_of_one_node_is_refused_by_another(site: Site, node_b: Workspace) -> None:
    """alice's token from node A means nothing to node B, which has an alice of its own."""
    other = Node(node_b, NodeConfig(server=ServerConfig(address="127.0.0.1", port=0)))
    await add_account(other, "alice", password=None)
    assert await site.get("accounts/me", "alice") == 200
    async with running(node_b, other.config.server, mounts=[query_api_mount(other)]) as served:
        headers = {"Authorization": f"Bearer {site.tokens['alice']}"}
        for path in ("accounts/me", "platform/token/validate", ""):
            async with site.http.get(served.url + path, headers=headers) as response:
                assert response.status == 401, path
