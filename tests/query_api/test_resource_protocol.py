"""The resource protocol (RFC-018 "REST API strategy") on a real server, through aiohttp's client:
apply, get (by id, DID, name), list with labels and accounts, watch, delete, a flow's runs; who
may do what; bad input named; secrets never in plain text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from odfd.app.node import Node
from odfd.app.resource_service import reconcile_here
from odfd.app.resources import account_handle
from odfd.config import NodeConfig, ServerConfig
from odfd.server.app import running
from odfd.server.resource_api import ResourceApi
from protocol.identity import AccountName
from storage.catalog.flow_runs import FlowRunTable
from storage.workspace import Workspace
from tests.daemon.test_resource_framework import EXAMPLES
from tests.query_api.conftest import ADMIN_TOKEN, PUSH_TOKEN, READ_TOKEN, Served

SECRETS = "/config/v1alpha1/secretset"
VARIABLES = "/config/v1alpha1/variableset"
PLAIN_SECRET = "internal-api-key-123"


def _secret_set(name: str, **labels: str) -> dict[str, Any]:
    return {
        "$schema": "https://opendatafabric.org/schemas/config/v1alpha1/SecretSet",
        "headers": {"name": name, "labels": labels},
        "spec": {"secrets": {"api_key": PLAIN_SECRET}},
    }


Session = Callable[..., Awaitable[tuple[int, Any, dict[str, str]]]]


def _run(served: Served, work: Callable[[Session], Awaitable[None]]) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession(served.url.rstrip("/")) as client:

            async def call(
                method: str,
                path: str,
                body: Any = None,
                *,
                token: str | None = ADMIN_TOKEN,
                yaml: str | None = None,
            ) -> tuple[int, Any, dict[str, str]]:
                headers = {} if token is None else {"Authorization": f"Bearer {token}"}
                if yaml is not None:
                    headers["Content-Type"] = "application/yaml"
                    data: Any = yaml.encode()
                else:
                    data = None if body is None else json.dumps(body).encode()
                    headers["Content-Type"] = "application/json"
                async with client.request(method, path, data=data, headers=headers) as response:
                    text = await response.text()
                    assert PLAIN_SECRET not in text
                    parsed = json.loads(text) if text else None
                    return response.status, parsed, dict(response.headers)

            await work(call)

    asyncio.run(main())


def test_apply_get_list_delete(served: Served) -> None:
    async def work(call: Session) -> None:
        status, created, _ = await call("POST", SECRETS, _secret_set("api-keys", env="prod"))
        assert status == 201, created
        assert created["status"]["phase"] == "Ready"
        assert created["headers"]["generation"] == 1
        stored = created["spec"]["secrets"]["api_key"]
        assert stored["contentEncoding"] == "jwe" and stored["value"].count(".") == 4
        resource_id = created["headers"]["id"]

        status, again, _ = await call("POST", SECRETS, _secret_set("api-keys", env="prod"))
        assert status == 200 and again["headers"]["generation"] == 1

        status, changed, _ = await call("POST", SECRETS, _secret_set("api-keys", env="dev"))
        assert status == 200 and changed["headers"]["generation"] == 2

        for ref in ("api-keys", resource_id):
            status, got, _ = await call("GET", f"{SECRETS}/{ref}")
            assert status == 200 and got["headers"]["id"] == resource_id
        status, got, _ = await call("GET", f"/config/v1alpha1/SecretSet/{resource_id}")
        assert status == 200

        await call("POST", SECRETS, _secret_set("other-keys", env="prod"))
        status, listed, _ = await call("GET", f"{SECRETS}?labelSelector=env=prod")
        assert [r["headers"]["name"] for r in listed["items"]] == ["other-keys"]
        status, listed, _ = await call("GET", f"{SECRETS}?name=%25-keys")
        assert {r["headers"]["name"] for r in listed["items"]} == {"api-keys", "other-keys"}

        status, deleted, _ = await call("DELETE", f"{SECRETS}/api-keys")
        assert status == 200 and deleted["headers"]["id"] == resource_id
        status, missing, _ = await call("GET", f"{SECRETS}/{resource_id}")
        assert status == 404 and "api-keys" not in missing["message"]
        await call("DELETE", f"{SECRETS}/other-keys")

    _run(served, work)


def test_concurrent_single_applies_each_get_their_own_answer(served: Served) -> None:
    """Concurrent POSTs are stored in groups (``odfd.app.grouped_applies``); each still answers
    its own resource, created or not, and a request that fails fails alone."""

    async def work(call: Session) -> None:
        names = [f"group-{n:02d}" for n in range(24)]
        replies = await asyncio.gather(
            *(call("POST", SECRETS, _secret_set(name, run=name)) for name in names),
            call("POST", SECRETS, _secret_set("group-00", run="again")),
            call("POST", VARIABLES, {"headers": {"name": "bad"}, "spec": {"varz": {}}}),
        )
        *singles, again, bad = replies
        # group-00 is applied twice at once: each answer is what is stored when it is sent
        for name, (status, body, _) in zip(names[1:], singles[1:], strict=True):
            assert status == 201, (name, status, body)
            assert body["headers"]["name"] == name
            assert body["headers"]["labels"] == {"run": name}
            assert body["status"]["phase"] == "Ready", (name, body)
        for status, body, _ in (singles[0], again):
            assert status in (200, 201) and body["headers"]["name"] == "group-00"
        assert {singles[0][0], again[0]} == {200, 201}
        assert bad[0] == 400 and "varz" in bad[1]["message"]
        status, listed, _ = await call("GET", f"{SECRETS}?name=group-%25")
        assert sorted(r["headers"]["name"] for r in listed["items"]) == names
        for name in names:
            await call("DELETE", f"{SECRETS}/{name}")

    _run(served, work)


def test_yaml_batch_and_accounts(served: Served) -> None:
    manifests = """\
headers:
  name: team-vars
spec:
  variables:
    host: postgres
---
headers:
  name: more-vars
spec:
  variables:
    port: "5113"
"""

    async def work(call: Session) -> None:
        status, applied, _ = await call("POST", f"{VARIABLES}?account=alice", yaml=manifests)
        assert status == 200, applied
        assert [r["headers"]["account"]["name"] for r in applied["items"]] == ["alice", "alice"]
        assert {r["status"]["phase"] for r in applied["items"]} == {"Ready"}

        status, own, _ = await call("GET", VARIABLES)
        assert "team-vars" not in {r["headers"]["name"] for r in own["items"]}
        did = account_handle(AccountName("alice")).did
        for account in ("alice", str(did)):
            status, theirs, _ = await call("GET", f"{VARIABLES}?account={account}")
            assert {r["headers"]["name"] for r in theirs["items"]} == {"team-vars", "more-vars"}
        status, got, _ = await call("GET", f"{VARIABLES}/team-vars?account=alice")
        assert status == 200 and got["spec"]["variables"] == {"host": "postgres"}
        status, _, _ = await call("GET", f"{VARIABLES}/team-vars")
        assert status == 404
        for name in ("team-vars", "more-vars"):
            status, _, _ = await call("DELETE", f"{VARIABLES}/{name}?account=alice")
            assert status == 200

    _run(served, work)


def test_tokens(served: Served) -> None:
    async def work(call: Session) -> None:
        status, body, headers = await call("GET", SECRETS, token=None)
        assert status == 401 and headers.get("WWW-Authenticate") == "Bearer"
        assert body["message"] == "No authentication token provided"  # the reference's words
        status, body, headers = await call("GET", SECRETS, token="not-a-token")
        assert status == 401 and body["message"] == "Authentication token invalid"
        assert headers.get("WWW-Authenticate") == 'Bearer error="invalid_token"'
        status, body, _ = await call("GET", SECRETS, token=PUSH_TOKEN)
        assert status == 403
        status, _, _ = await call("GET", SECRETS, token=READ_TOKEN)
        assert status == 200
        status, body, _ = await call("GET", f"{SECRETS}?account=alice", token=READ_TOKEN)
        assert status == 403 and "own account" in body["message"]
        status, body, _ = await call("POST", SECRETS, _secret_set("x"), token=READ_TOKEN)
        assert status == 403 and "admin" in body["message"]
        status, _, _ = await call("GET", f"{SECRETS}/x")
        assert status == 404  # nothing was stored by the refused write

    _run(served, work)


def test_bad_input_is_named(served: Served) -> None:
    async def work(call: Session) -> None:
        bad = _secret_set("bad") | {"spec": {"secrets": {}, "colour": "red"}}
        status, body, _ = await call("POST", SECRETS, bad)
        assert status == 400 and "request body document 0" in body["message"]
        assert "colour" in body["message"]

        status, body, _ = await call("POST", SECRETS, [_secret_set("fine"), bad])
        assert status == 400 and "request body document 1" in body["message"]
        status, _, _ = await call("GET", f"{SECRETS}/fine")
        assert status == 404  # a batch is validated whole before anything is stored

        status, body, _ = await call("POST", VARIABLES, _secret_set("wrong-path"))
        assert status == 400 and "/config/v1alpha1/secretset" in body["message"]

        status, body, _ = await call("GET", "/config/v1alpha1/gizmo")
        assert status == 404 and "not a resource type" in body["message"]
        status, body, _ = await call("GET", "/dataset/v1alpha1/secretset")
        assert status == 404 and "/config/v1alpha1/secretset" in body["message"]

        status, body, _ = await call("POST", SECRETS, None)
        assert status == 400 and "empty" in body["message"]
        status, body, _ = await call("GET", f"{SECRETS}?labelSelector=nokey")
        assert status == 400 and "nokey" in body["message"]

    _run(served, work)


def test_watch_sees_a_new_generation(served: Served) -> None:
    async def work(call: Session) -> None:
        await call("POST", SECRETS, _secret_set("watched", env="a"))

        async def change_soon() -> None:
            await asyncio.sleep(0.5)
            await call("POST", SECRETS, _secret_set("watched", env="b"))

        async with aiohttp.ClientSession(served.url.rstrip("/")) as client:
            changer = asyncio.create_task(change_soon())
            events = []
            async with client.get(
                f"{SECRETS}/watched?watch=true&timeoutSeconds=3",
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            ) as response:
                assert response.headers["Content-Type"].startswith("application/x-ndjson")
                async for line in response.content:
                    events.append(json.loads(line))
                    if events[-1]["object"]["headers"]["generation"] == 2:
                        break
            await changer
        assert events[0]["type"] == "ADDED"
        assert events[-1]["type"] == "MODIFIED"
        assert events[-1]["object"]["headers"]["labels"] == {"env": "b"}
        await call("DELETE", f"{SECRETS}/watched")

    _run(served, work)


def test_flow_runs_and_deliveries(served: Served) -> None:
    flow = {
        "$schema": "https://opendatafabric.org/schemas/flow/v1alpha1/Flow",
        "headers": {"name": "gc-nightly"},
        "spec": {
            "target": "Dataset:%",
            "triggers": [{"kind": "Schedule", "cron": "0 3 * * *"}],
            "tasks": [{"kind": "GarbageCollection"}],
        },
    }

    async def record_runs(flow_id: str) -> list[int]:
        table = FlowRunTable(served.node.workspace.catalog)
        ids = []
        for n, error in enumerate((None, "TaskError: boom")):
            at = datetime(2026, 3, 1, 3, n, tzinfo=UTC)
            run_id = await table.start(flow_id, "gc-nightly", "schedule", at)
            await table.finish(run_id, "failed" if error else "succeeded", at, error)
            ids.append(run_id)
        return ids

    async def work(call: Session) -> None:
        status, created, _ = await call("POST", "/flow/v1alpha1/flow", flow)
        assert status == 201 and created["status"]["phase"] == "Ready", created
        ids = served.run(record_runs(created["headers"]["id"]))
        status, runs, _ = await call("GET", "/flow/v1alpha1/flow/gc-nightly/runs")
        assert status == 200
        assert [(r["runId"], r["state"]) for r in runs["items"]] == [
            (ids[1], "failed"),
            (ids[0], "succeeded"),
        ]
        assert runs["items"][0]["error"] == "TaskError: boom"
        status, runs, _ = await call("GET", "/flow/v1alpha1/flow/gc-nightly/runs?limit=1")
        assert len(runs["items"]) == 1
        status, body, _ = await call("GET", "/flow/v1alpha1/flow/nope/runs")
        assert status == 404 and "nope" in body["message"]
        status, body, _ = await call("GET", "/sink/v1alpha1/webhooktarget/nope/deliveries")
        assert status == 404
        status, _, _ = await call("GET", "/flow/v1alpha1/flow/gc-nightly/runs", token=PUSH_TOKEN)
        assert status == 403
        await call("DELETE", "/flow/v1alpha1/flow/gc-nightly")

    _run(served, work)


def test_spec_examples_through_http(tmp_path: Path) -> None:
    """Each of the spec's example manifests POSTed as YAML to the path of its type on a fresh
    node: every one applied with a status (a Failed one says why), as ``odfd apply`` does (the
    same use cases)."""
    config = ServerConfig(port=0, admin_tokens=frozenset({ADMIN_TOKEN}))

    async def main() -> None:
        async with await Workspace.init(tmp_path / "ws") as workspace:
            node = Node(workspace, NodeConfig(server=config))
            api = ResourceApi(lambda: node, reconcile_here(node))
            async with (
                running(workspace, config, mounts=[api]) as server,
                aiohttp.ClientSession(
                    server.url.rstrip("/"), headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
                ) as client,
            ):
                applied = 0
                for path in sorted(EXAMPLES.rglob("*.yaml")):
                    key = str(path.relative_to(EXAMPLES))
                    text = path.read_text()
                    schema = next(
                        line.split(":", 1)[1].strip()
                        for line in text.splitlines()
                        if line.startswith("$schema:")
                    )
                    route = "/".join(schema.split("/")[-3:]).lower()
                    async with client.post(
                        f"/{route}", data=text, headers={"Content-Type": "application/yaml"}
                    ) as response:
                        body = await response.json()
                    assert response.status in (200, 201), (key, body)  # some share a name
                    status = body["status"]
                    assert status["phase"] in ("Ready", "Failed"), (key, status)
                    if status["phase"] == "Failed":
                        assert any(c.get("message") for c in status["conditions"].values()), key
                    applied += 1
                assert applied == len(list(EXAMPLES.rglob("*.yaml"))) == 24

    asyncio.run(main())


def test_a_dataset_with_a_literal_secret_is_applied_with_a_warning_header(
    tmp_path: Path,
) -> None:
    """A ``Dataset`` whose fetch step holds a credential in the clear is applied, with a
    ``Warning`` header naming the field (as ``odfd add``/``apply`` print it), never the secret
    (the answer shows the spec as stored, as the chain will); a templated one gets none."""
    from tests.cli.test_apply_secrets import ADVICE, dataset_manifest

    config = ServerConfig(port=0, admin_tokens=frozenset({ADMIN_TOKEN}))

    async def main() -> None:
        async with await Workspace.init(tmp_path / "ws") as workspace:
            node = Node(workspace, NodeConfig(server=config))
            api = ResourceApi(lambda: node, reconcile_here(node))
            async with (
                running(workspace, config, mounts=[api]) as server,
                aiohttp.ClientSession(
                    server.url.rstrip("/"),
                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                ) as client,
            ):
                leaky = dataset_manifest("Bearer abc123", "https://example.org/c.csv")
                async with client.post(
                    "/dataset/v1alpha1/dataset",
                    data=leaky,
                    headers={"Content-Type": "application/yaml"},
                ) as response:
                    assert response.status == 201, await response.text()
                    warnings = response.headers.getall("Warning")
                field = "feed.cases: SetPollingSource.fetch.headers[Authorization]"
                assert warnings == [f'299 - "{field}{ADVICE}"']
                assert "abc123" not in "".join(warnings)
                templated = leaky.replace("Bearer abc123", "Bearer ${{ env.TOKEN }}")
                async with client.post(
                    "/dataset/v1alpha1/dataset",
                    data=templated,
                    headers={"Content-Type": "application/yaml"},
                ) as response:
                    assert response.status == 200, await response.text()
                    assert "Warning" not in response.headers

    asyncio.run(main())
