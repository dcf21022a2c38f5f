"""The spec's auth example on a served node: alice (maintainer of ``bob/bobs-dataset``) may push
to and ingest into it, carol (no role) gets 403 while it is publicly readable and 404 once it is
not, anonymous clients get what ``allowAnonymousRead`` says, and expired or revoked tokens are
refused on every way in. ``odfd access`` explains each answer."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from odfd.app.access import access_report
from odfd.app.accounts import add_account, create_token, revoke_token
from odfd.app.authorization import Action
from odfd.app.controllers import Reconciler
from odfd.app.node import Node
from odfd.app.resources import apply_manifests, load_manifests
from odfd.config import NodeConfig, ServerConfig, SyncConfig
from odfd.server.app import Mount, running
from odfd.server.ingest_api import IngestApi
from odfd.server.query_api import query_api_mount
from odfd.sync.errors import AccessDeniedError
from odfd.sync.push import PushOptions, push
from storage.workspace import Workspace
from tests.replication.datagen import create_root

EXAMPLE = Path(__file__).parents[1] / "fixtures" / "spec_examples" / "auth-accounts-permissions"
DATASET = "bob/bobs-dataset"
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
    server = ServerConfig(address="127.0.0.1", port=0)
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
    mounts: list[Mount] = [query_api_mount(node), IngestApi(lambda: node)]
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
    site: Site, node_a: Workspace, node_b: Workspace
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
    head = f"{DATASET}/refs/head"
    ways = (
        "Simple Transfer pull (`GET refs/head`)",
        "dataset listing (`GET /`)",
        "query API (`POST /query`)",
        "HTTP ingest (`POST …/ingest`)",
        "Smart Transfer push",
    )
    rows = []
    for role, who in ROLE_ROWS.items():
        pull = await site.get(head, who) == 200
        listed = DATASET in await site.listed(who)
        query = await site.query(who) == 200
        ingest = who is not None and await site.ingest(who) not in (401, 403, 404)
        pushed = False
        if who is not None:
            await site.writer.append(slices=1)  # a refused push leaves it for the next role
            options = PushOptions(token=site.tokens[who])
            try:
                await push(node_b, "cities", site.url + DATASET, options=options)
                pushed = True
            except AccessDeniedError:
                pushed = False
        rows.append((role, (pull, listed, query, ingest, pushed)))
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
    assert expected["anonymous"] == (False, False, False, False, False)
    assert expected["signed-in, no role"] == (True, True, True, False, False)
    assert expected["reader"] == (True, True, True, False, False)
    assert expected["editor"] == expected["maintainer"] == expected["owner"] == (True,) * 5
    assert expected["node admin"] == (True,) * 5
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
        for path in (f"{DATASET}/refs/head?token={secret}", f"query?access_token={secret}"):
            async with site.http.get(site.url + path, headers=headers) as response:
                answers.append(await response.text())
    assert await site.ingest("revoked") == 401
    answers.append(site.last)
    for secret in secrets:
        assert secret not in caplog.text
        assert not any(secret in answer for answer in answers)
