"""The console's JSON API on a real server over loopback (``odfd serve``'s app, no daemon):
what anyone may read, what private datasets show to whom, and that actions and the SQL box refuse
requests without the right token or from another site."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from odfd.config import ConfigError, ServerConfig, load_config
from odfd.server.app import running
from protocol.identity import DatasetAliasPattern
from storage.catalog.audit_records import AuditRecord
from storage.catalog.audits import AuditTable
from storage.workspace import Workspace
from tests.console.pipelines import MIDDLE, ROOT, TOP, console_of, three_levels
from tests.query_api import verifier
from tests.replication.datagen import create_root

READ, ADMIN = "read-token", "admin-token"
SECRET = "secret.numbers"


@dataclass
class Node:
    url: str
    http: aiohttp.ClientSession
    workspace: Workspace

    async def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        """The status and the decoded JSON body (or the text of any other body)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.http.get(self.url + path, headers=headers) as response:
            body = await (
                response.json() if response.content_type.endswith("json") else response.text()
            )
            return response.status, body

    async def post(
        self, path: str, body: object, token: str | None = None, **headers: str
    ) -> tuple[int, Any]:
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with self.http.post(self.url + path, json=body, headers=headers) as response:
            return response.status, await response.json()


@pytest.fixture
async def node(workspace: Workspace) -> AsyncIterator[Node]:
    async for served in _serve(workspace):
        yield served


async def _serve(workspace: Workspace) -> AsyncIterator[Node]:
    await three_levels(workspace)
    await create_root(workspace, SECRET, slices=1, rows=5)
    config = ServerConfig(
        address="127.0.0.1",
        port=0,
        private=(DatasetAliasPattern.parse("secret.%"),),
        read_tokens=frozenset({READ}),
        admin_tokens=frozenset({ADMIN}),
    )
    async with (
        running(workspace, config, mounts=[console_of(workspace)]) as server,
        aiohttp.ClientSession() as http,
    ):
        yield Node(server.url, http, workspace)


async def test_datasets_list_search_and_private_visibility(node: Node) -> None:
    status, body = await node.get("ui/api/datasets")
    assert status == 200
    rows = {d["alias"]: d for d in body["datasets"]}
    assert set(rows) == {ROOT, MIDDLE, TOP}  # the private one is not there
    assert (rows[ROOT]["records"], rows[ROOT]["blocks"], rows[ROOT]["kind"]) == (30, 5, "Root")
    assert rows[ROOT]["size"] > 0 and rows[MIDDLE]["records"] == 0
    _, body = await node.get("ui/api/datasets?q=VALUES")
    assert [d["alias"] for d in body["datasets"]] == [MIDDLE]
    _, body = await node.get("ui/api/datasets?offset=1&limit=1")
    assert body["total"] == 3 and [d["alias"] for d in body["datasets"]] == [TOP]

    for token in (READ, ADMIN):
        _, body = await node.get("ui/api/datasets", token)
        assert SECRET in {d["alias"] for d in body["datasets"]}
    # The same rule everywhere on the server: console, listing, Simple Transfer.
    for path in (f"ui/api/datasets/{SECRET}", f"{SECRET}/refs/head"):
        assert (await node.get(path))[0] == 404
        assert (await node.get(path, "wrong"))[0] == 401  # a bad token is refused
        assert (await node.get(path, READ))[0] == 200
    _, listing = await node.get("")
    assert SECRET not in {d["alias"] for d in listing["datasets"]}
    status, _ = await node.get("ui/api/datasets?limit=100000")
    assert status == 400


async def test_cached_listing_follows_the_catalog(node: Node) -> None:
    """The console rereads the catalog only when it changed, but always when it did."""
    _, first = await node.get("ui/api/datasets")
    _, again = await node.get("ui/api/datasets")
    assert [d["alias"] for d in again["datasets"]] == [d["alias"] for d in first["datasets"]]
    writer = await create_root(node.workspace, "cities.new", slices=1, rows=3)
    _, body = await node.get("ui/api/datasets")
    assert body["total"] == 4 and "cities.new" in {d["alias"] for d in body["datasets"]}
    await writer.append(slices=1, rows=4)
    _, body = await node.get("ui/api/datasets?q=cities.new")
    assert (body["datasets"][0]["records"], body["datasets"][0]["blocks"]) == (7, 4)
    await node.workspace.rename_dataset("cities.new", "cities.renamed")
    _, body = await node.get("ui/api/datasets?q=cities.")
    assert [d["alias"] for d in body["datasets"]] == ["cities.renamed", TOP, MIDDLE]


async def test_dataset_pages(node: Node) -> None:
    _, overview = await node.get(f"ui/api/datasets/{MIDDLE}")
    assert overview["description"] == "The cities.values dataset"
    assert overview["license"]["spdxId"] == "CC0-1.0"
    assert overview["readme"].startswith("# cities.values")
    assert overview["transforms"][0]["inputs"] == [ROOT]

    _, data = await node.get(f"ui/api/datasets/{ROOT}/data?limit=4")
    assert data["total"] == 30 and data["columns"][0] == "offset"
    assert [row[0] for row in data["rows"]] == [29, 28, 27, 26]  # newest first
    _, data = await node.get(f"ui/api/datasets/{ROOT}/data?offset=8&limit=5")
    assert [row[0] for row in data["rows"]] == [21, 20, 19, 18, 17]  # across slice boundaries

    _, blocks = await node.get(f"ui/api/datasets/{ROOT}/blocks?limit=2")
    assert [b["sequenceNumber"] for b in blocks["blocks"]] == [4, 3]
    assert blocks["blocks"][0]["kind"] == "AddData" and blocks["blocks"][0]["records"] == 10
    assert "kind: AddData" in blocks["blocks"][0]["yaml"]
    _, older = await node.get(f"ui/api/datasets/{ROOT}/blocks?before=2")
    assert [b["kind"] for b in older["blocks"]] == ["SetDataSchema", "Seed"]

    _, lineage = await node.get(f"ui/api/datasets/{MIDDLE}/lineage")
    aliases = {n["id"]: n["alias"] for n in lineage["nodes"]}
    assert sorted((aliases[e["from"]], aliases[e["to"]]) for e in lineage["edges"]) == [
        (ROOT, MIDDLE),
        (MIDDLE, TOP),
    ]
    _, history = await node.get(f"ui/api/datasets/{ROOT}/history")
    assert [p["records"] for p in history["points"]] == [10, 10, 10]
    _, audits = await node.get(f"ui/api/datasets/{ROOT}/audits")
    assert audits == {"audits": []}
    record = await node.workspace.resolve(ROOT)
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    report = {"status": "passed", "datasets": []}
    for n in range(2):
        audit = AuditRecord(
            record.id, ROOT, "integrity", f"test {n}", record.head, started, started, "ok", "fine"
        )
        await AuditTable(node.workspace.catalog).add(
            replace(audit, report=json.dumps(report)) if n else audit, keep=5
        )
    _, audits = await node.get(f"ui/api/datasets/{ROOT}/audits")
    newest, oldest = audits["audits"]
    assert (newest["trigger"], newest["report"], oldest["report"]) == ("test 1", report, None)
    assert newest["head"] == record.head.to_multibase() and newest["status"] == "ok"
    assert newest["startedAt"] == newest["finishedAt"] == "2026-01-02T03:04:05+00:00"
    _, mirrors = await node.get("ui/api/mirrors")
    assert mirrors == {"daemon": {"running": False}, "mirrors": []}
    _, info = await node.get("ui/api/node", ADMIN)
    assert info["datasets"] == 4 and info["tokens"] == {"read": True, "admin": True}
    assert info["engines"][0]["name"] == "spark" and info["metrics"] == []


async def test_actions_and_sql_need_tokens_and_the_same_origin(node: Node) -> None:
    path = f"ui/api/datasets/{ROOT}/audit"
    status, body = await node.post(path, {"scope": "integrity"})
    assert status == 401 and "admin token" in body["error"]
    status, body = await node.post(path, {"scope": "integrity"}, READ)
    assert status == 401
    status, body = await node.post(path, {}, ADMIN, Origin="https://evil.example")
    assert status == 403 and "evil.example" in body["error"]
    status, body = await node.post(path, {}, ADMIN, **{"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    # Authorised, but nothing can audit without a daemon: said so, not pretended.
    status, body = await node.post(path, {}, ADMIN)
    assert status == 409 and "no daemon runs" in body["error"]
    status, body = await node.post("ui/api/mirrors/cities/sync", {}, ADMIN)
    assert status == 409
    status, body = await node.post("ui/api/sql", {"query": f"SELECT * FROM {ROOT}"})
    assert status == 401 and "needs a bearer token" in body["error"]
    status, body = await node.post("ui/api/sql", {"query": " "}, READ)
    assert status == 400 and "query" in body["error"]
    # The SQL box speaks `odfd sql`'s dialect: DataFusion, names in double quotes.
    status, body = await node.post(
        "ui/api/sql", {"query": f'SELECT "offset" FROM "{ROOT}" ORDER BY "offset" LIMIT 2'}, READ
    )
    assert status == 200 and body["engine"] == "datafusion"
    assert body["rows"] == [[0], [1]]


async def test_pages_and_assets_are_served_locally(node: Node) -> None:
    async with node.http.get(node.url + "ui", allow_redirects=False) as response:
        assert response.status == 302 and response.headers["Location"] == "/ui/"
    async with node.http.get(node.url + "ui/") as response:
        page = await response.text()
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
    for asset in ("app.js", "style.css", "vendor/dagre.min.js", "vendor/htm-preact-standalone.mjs"):
        assert f"/ui/static/{asset}" in page or asset.startswith("vendor/htm")
        async with node.http.get(node.url + f"ui/static/{asset}") as response:
            assert response.status == 200 and len(await response.read()) > 1000
    async with node.http.get(node.url + "ui/static/../../config.toml") as response:
        assert response.status in (403, 404)


def test_private_patterns_and_tokens_are_read_from_config(tmp_path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[server]\nprivate = ["secret.%", "alice/%"]\nread_tokens = ["r"]\nadmin_tokens = ["a"]\n'
    )
    config = load_config(path, env={}).server
    assert config.is_private("secret.numbers") and not config.is_private("cities")
    assert config.read_tokens == frozenset({"r"}) and config.admin_tokens == frozenset({"a"})
    path.write_text('[server]\nprivate = ["not a pattern!"]\n')
    with pytest.raises(ConfigError, match=r"\[server\] private"):
        load_config(path, env={})
    assert replace(config, private=()).is_private("secret.numbers") is False


async def test_a_broken_dataset_gets_its_error_on_the_page(node: Node) -> None:
    record = await node.workspace.resolve(ROOT)
    data_dir = node.workspace.layout.dataset(record.id).root / "data"
    for path in data_dir.iterdir():
        path.unlink()
    status, body = await node.get(f"ui/api/datasets/{ROOT}/data")
    assert status == 500
    assert body["error"].startswith(f"dataset {ROOT}: 3 of its 3 data slice(s) are missing")
    assert str(node.workspace.root) not in body["error"]


async def test_the_sql_box_answers_with_a_proof_anyone_can_check(node: Node) -> None:
    sql = f'SELECT "offset" FROM "{ROOT}" ORDER BY "offset" LIMIT 2'
    status, body = await node.post("ui/api/sql", {"query": sql, "proof": "yes"}, READ)
    assert (status, body["error"]) == (400, "field proof must be true or false")
    # A node without an identity key answers, but cannot sign.
    status, body = await node.post("ui/api/sql", {"query": sql, "proof": True}, READ)
    assert (status, body["error"]) == (400, "Response signing is not enabled by the node operator")

    node.workspace.keys.node_key()
    status, body = await node.post("ui/api/sql", {"query": sql, "proof": True}, READ)
    assert status == 200 and body["rows"] == [[0], [1]] and not body["truncated"]
    answer = body["answer"]
    verifier.check(answer)  # canonical JSON, sha3-256, ed25519: nothing of odfd's
    assert answer["output"]["data"] == [{"offset": 0}, {"offset": 1}]
    assert [d["alias"] for d in answer["input"]["datasets"]] == [ROOT]
    assert answer["proof"]["verificationMethod"].startswith("did:key:z6Mk")
    # the same box without a proof keeps its answer as it was
    status, body = await node.post("ui/api/sql", {"query": sql}, READ)
    assert status == 200 and "answer" not in body
