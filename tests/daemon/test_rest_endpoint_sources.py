"""``RestEndpoint`` Sources: the spec's ``source-push-http`` example on a real server — records
posted over HTTP wait in the Source's buffer, its flow's ``Source`` trigger fires at
``minRecordsToAwait`` and the ``Ingest`` task commits them; a buffer over capacity applies its
overflow policy (``Reject``: the post refused whole, nothing lost; ``DropOldest``: counted);
bad records, tokens and sources each get one clear answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from odfd.app.controllers import Reconciler
from odfd.app.node import Node
from odfd.app.resource_types import SOURCE
from odfd.app.resources import apply_manifests, load_manifests
from odfd.app.source_push import parse_records
from odfd.config import SyncConfig, load_config
from odfd.daemon.service import Daemon
from odfd.flows.runner import FlowRunner
from odfd.flows.tasks import NodeTasks, WorkspaceTargets
from odfd.server.app import running
from odfd.server.source_api import SourceApi
from odfd.sources.buffers import BufferFullError, SourceBuffer, SourceBuffers
from odfd.sources.spec import BufferPolicy, SourceDefinition
from odfd.webhooks.delivery import WebhookDeliverer
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.resources import ResourceTable
from storage.catalog.webhook_deliveries import WebhookDeliveryTable
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import rows

EXAMPLES = Path(__file__).parents[1] / "fixtures" / "spec_examples" / "source-push-http"
PUSH = "push-token"


@dataclass
class Served:
    url: str
    http: aiohttp.ClientSession
    workspace: Workspace
    runner: FlowRunner
    runs: FlowRunTable
    buffers: SourceBuffers
    pushed: list[str]
    """Sources the endpoint said received records (the daemon then checks its flows)."""
    folder: Path
    node: Node

    async def apply(self) -> None:
        """The example's manifests (in the test's own task: the loop check spares it)."""
        await apply_manifests(self.workspace, load_manifests([self.folder]))
        await Reconciler(self.workspace, SyncConfig()).reconcile_all()

    async def post(
        self,
        records: list[dict[str, Any]] | bytes,
        *,
        source: str = "sensor.temp.http",
        token: str | None = PUSH,
        content_type: str = "application/x-ndjson",
    ) -> tuple[int, dict[str, Any]]:
        body = (
            records
            if isinstance(records, bytes)
            else b"\n".join(json.dumps(r).encode() for r in records)
        )
        headers = {"Content-Type": content_type}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with self.http.post(
            f"{self.url}source/{source}/ingest", data=body, headers=headers
        ) as response:
            return response.status, await response.json()


def _readings(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {"ts": f"2026-03-02T10:{(start + i) // 60 % 60:02d}:{(start + i) % 60:02d}Z", "temp": 20.5}
        for i in range(count)
    ]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        folder = tmp_path / "m"
        folder.mkdir()
        for name in ("dataset-raw.yaml", "source.yaml", "flow.yaml"):
            # offset as the reference writes it (the example declares UInt64)
            text = (EXAMPLES / name).read_text().replace("UInt64", "Int64")
            (folder / name).write_text(text)
        (folder / "polling.yaml").write_text(
            "$schema: Source\nheaders: {name: polled}\n"
            "spec:\n  ingress: {kind: Url, url: 'http://127.0.0.1:9/x.csv'}\n"
            "  read: {kind: Csv}\n"
        )
        config = load_config(workspace.layout.config_path)
        server = replace(config.server, address="127.0.0.1", port=0, push_tokens=frozenset({PUSH}))
        node = Node(workspace, replace(config, server=server), engines=TEST_ENGINES)
        resources = ResourceTable(workspace.catalog)
        runs = FlowRunTable(workspace.catalog)
        buffers = SourceBuffers()
        deliverer = WebhookDeliverer(WebhookDeliveryTable(workspace.catalog), resources)
        runner = FlowRunner(
            resources,
            runs,
            NodeTasks(node, deliverer, buffers),
            WorkspaceTargets(node),
            sources=buffers,
        )

        told: list[str] = []

        async def pushed(name: str) -> None:
            told.append(name)

        api = SourceApi(lambda: node, buffers, pushed=pushed)
        async with (
            running(workspace, server, mounts=[api]) as running_server,
            aiohttp.ClientSession() as http,
        ):
            yield Served(
                running_server.url, http, workspace, runner, runs, buffers, told, folder, node
            )


@pytest.mark.spark
async def test_posted_records_flushed_by_the_source_trigger(served: Served) -> None:
    await served.apply()
    source = await ResourceTable(served.workspace.catalog).find(SOURCE.schema, "sensor.temp.http")
    assert source is not None and source.status["phase"] == "Ready", source.status

    status, body = await served.post(_readings(0, 60))
    assert (status, body) == (202, {"accepted": 60, "dropped": 0, "buffered": 60})
    assert served.pushed == ["sensor.temp.http"]
    assert await served.runner.source_pushed() == []  # 60 < minRecordsToAwait (100)

    status, body = await served.post(_readings(60, 50), content_type="application/json")
    assert status == 400  # a JSON body must be a JSON document
    status, body = await served.post(
        json.dumps(_readings(60, 50)).encode(), content_type="application/json"
    )
    assert (status, body["buffered"]) == (202, 110)
    assert len(await served.runner.source_pushed()) == 1
    [run] = await served.runs.list()
    assert (run.trigger, run.state, run.error) == ("source", "succeeded", None)
    assert served.buffers.pending("sensor.temp.http") == (0, None)

    found = await served.workspace.catalog.find_by_alias("sensor.temp")
    assert found is not None
    dataset = served.workspace.open_dataset(found.id)
    written = await rows(dataset, "offset", "temp")
    assert len(written) == 110 and written[0] == (0, 20.5) and written[-1][0] == 109
    kinds = {type(b.event).__name__ async for _, b in dataset.chain.iter_blocks()}
    assert "AddPushSource" not in kinds and "SetPollingSource" not in kinds


async def test_overflow_rejects_whole_posts_and_keeps_what_waits(served: Served) -> None:
    await served.apply()
    status, body = await served.post(_readings(0, 1001))
    assert status == 429
    assert body["message"].startswith(
        "the buffer of Source sensor.temp.http holds 0 of 1000 records; 1001 more do not fit"
    )
    for start in range(0, 90, 10):  # 90 records: below the trigger, which fires no flow here
        assert (await served.post(_readings(start, 10)))[0] == 202
    status, body = await served.post(_readings(0, 911))
    assert status == 429 and "holds 90 of 1000" in body["message"]
    assert served.buffers.pending("sensor.temp.http")[0] == 90  # nothing lost, nothing taken

    assert (await served.post(b'{"ts": 1}\nnot json\n'))[0] == 400
    assert (await served.post(_readings(0, 1), token=None))[0] == 401
    assert (await served.post(_readings(0, 1), token="other"))[0] == 401  # unknown token
    status, body = await served.post(_readings(0, 1), source="nope")
    assert (status, body["message"]) == (404, "no Source nope on this node")
    status, body = await served.post(_readings(0, 1), source="polled")
    assert status == 404 and "takes no pushed records" in body["message"]
    assert (await served.post(b"a,b\n", content_type="text/csv"))[0] == 415
    assert served.buffers.pending("sensor.temp.http")[0] == 90


def test_drop_oldest_and_settling_only_what_was_committed() -> None:
    buffer = SourceBuffer("s", BufferPolicy(capacity=3, drop_oldest=True))
    buffer.push([b"1", b"2"])
    batch = buffer.peek()
    assert batch is not None and batch.records == (b"1", b"2")
    accepted = buffer.push([b"3", b"4"])  # while the batch is being ingested
    assert (accepted.dropped, accepted.buffered) == (1, 3)
    buffer.settle(batch)  # "1" was dropped, "2" committed: only "3" and "4" remain
    rest = buffer.peek()
    assert rest is not None and rest.records == (b"3", b"4")
    with pytest.raises(BufferFullError):
        SourceBuffer("r", BufferPolicy(capacity=1, drop_oldest=False)).push([b"1", b"2"])
    assert parse_records(b'{"a":1}\n\n{"b":2}\n', None) == [b'{"a":1}', b'{"b":2}']


class _Waiting:
    """Five records, the oldest waiting ``age`` seconds."""

    def __init__(self, age: float) -> None:
        self.age = age

    def pending(self, source_name: str) -> tuple[int, float | None]:
        return (5, self.age) if source_name == "sensor.temp.http" else (0, None)


async def test_max_await_interval_fires_below_min_records(served: Served) -> None:
    await served.apply()
    node_tasks = served.runner.executor
    assert isinstance(node_tasks, NodeTasks)
    resources = ResourceTable(served.workspace.catalog)
    waiting = _Waiting(age=3599.0)
    runner = FlowRunner(
        resources, served.runs, node_tasks, WorkspaceTargets(node_tasks.node), sources=waiting
    )
    assert await runner.tick() == []  # 5 < 100 records, and not yet an hour
    waiting.age = 3600.0
    assert len(await runner.tick()) == 1  # maxAwaitInterval: 1h


@pytest.mark.spark
async def test_the_daemon_runs_the_flow_when_records_arrive(served: Served) -> None:
    """The daemon's own wiring: its endpoint's buffers are its flows' buffers, and a push that
    reaches ``minRecordsToAwait`` runs the flow in the background, once."""
    await served.apply()
    daemon = Daemon(served.node)
    source = await ResourceTable(served.workspace.catalog).find(SOURCE.schema, "sensor.temp.http")
    assert source is not None
    buffer = daemon.source_buffers.of(
        source.id, source.name, SourceDefinition.from_record(source).buffer()
    )
    buffer.push([json.dumps(r).encode() for r in _readings(0, 150)])
    await daemon._source_pushed("sensor.temp.http")
    await daemon._source_pushed("sensor.temp.http")  # while the first check runs: one more, after
    while daemon._background:
        await asyncio.gather(*daemon._background)
    runs = await served.runs.list()
    assert [(r.trigger, r.state) for r in runs] == [("source", "succeeded")]
    assert len(buffer) == 0
    found = await served.workspace.catalog.find_by_alias("sensor.temp")
    assert found is not None
    assert len(await rows(served.workspace.open_dataset(found.id), "offset")) == 150
