"""Flows and webhook targets: Standard Webhooks signatures checked by a real local receiver,
retries with back-off and a recorded failure when the target is down, a cron flow fired by a
controllable clock, a compaction flow fired by ``dataset.ref.updated``, a failing flow backing
off and showing as failing, and the spec's examples of these types applying."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from odfd.app.controllers import Reconciler
from odfd.app.node import Node
from odfd.app.resource_types import FLOW, WEBHOOK_TARGET
from odfd.app.resources import RECONCILE_ERROR, apply_manifests, load_manifests
from odfd.config import NodeConfig, SyncConfig
from odfd.daemon.service import Daemon
from odfd.flows.runner import FAILING, LAST_RUN, BackOff, FlowRunner
from odfd.flows.tasks import NodeTasks, WorkspaceTargets
from odfd.webhooks.delivery import LAST_DELIVERY, RetryPolicy, WebhookDeliverer, WebhookTarget
from odfd.webhooks.signing import SignatureError, signed_headers, verify
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.resources import ResourceTable
from storage.catalog.webhook_deliveries import WebhookDeliveryTable
from storage.workspace import Workspace
from tests.fixtures.resources import apply_and_reconcile_files, stored
from tests.verifier.builders import root_with_slices

EXAMPLES = Path(__file__).parents[1] / "fixtures" / "spec_examples"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
T0 = datetime(2026, 3, 2, 10, 7, tzinfo=UTC)


@dataclass
class Receiver:
    url: str
    secret: str
    fail_first: int = 0
    received: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    box = Receiver("", SECRET)

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        box.ids.append(request.headers["webhook-id"])
        if box.fail_first > 0:
            box.fail_first -= 1
            return web.Response(status=503)
        try:
            verify(box.secret, dict(request.headers), body, now=time.time())
        except SignatureError as err:
            box.bad.append(str(err))
            return web.Response(status=401)
        box.received.append(await request.json())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook/", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    box.url = f"http://127.0.0.1:{port}/hook/"
    yield box
    await runner.cleanup()


def test_signature_round_trip_and_tampering() -> None:
    body = b'{"a":1}'
    headers = signed_headers(SECRET, "msg_1", 1_700_000_000, body)
    assert headers["webhook-signature"].startswith("v1,")
    verify(SECRET, headers, body, now=1_700_000_010)
    with pytest.raises(SignatureError, match="no webhook-signature matches"):
        verify(SECRET, headers, b'{"a":2}', now=1_700_000_010)
    with pytest.raises(SignatureError, match="no webhook-signature matches"):
        verify("whsec_b3RoZXI=", headers, body, now=1_700_000_010)
    with pytest.raises(SignatureError, match="outside the tolerance"):
        verify(SECRET, headers, body, now=1_700_001_000)


def _target_yaml(url: str, name: str = "com.example.hook", secret: str = SECRET) -> str:
    return (
        f"$schema: WebhookTarget\nheaders: {{name: {name}}}\n"
        f"spec:\n  url: {url}\n  secret: {secret}\n"
    )


@dataclass
class Env:
    workspace: Workspace
    node: Node
    folder: Path
    clock: list[datetime]
    runner: FlowRunner
    resources: ResourceTable
    deliveries: WebhookDeliveryTable
    runs: FlowRunTable
    tasks: NodeTasks

    async def apply(self, name: str, text: str) -> None:
        path = self.folder / name
        path.write_text(text)
        await apply_and_reconcile_files(self.workspace, path)

    async def resource(self, schema: str, name: str) -> Any:
        return await stored(self.resources, schema, name)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        node = Node(workspace, NodeConfig())
        resources = ResourceTable(workspace.catalog)
        deliveries = WebhookDeliveryTable(workspace.catalog)
        runs = FlowRunTable(workspace.catalog)
        retry = RetryPolicy(attempts=3, first_delay=0.01, timeout=2)
        deliverer = WebhookDeliverer(deliveries, resources, retry)
        clock = [T0]
        tasks = NodeTasks(node, deliverer)
        runner = FlowRunner(
            resources,
            runs,
            tasks,
            WorkspaceTargets(node),
            clock=lambda: clock[0],
            back_off=BackOff(first=60),
        )
        folder = tmp_path / "m"
        folder.mkdir()
        yield Env(workspace, node, folder, clock, runner, resources, deliveries, runs, tasks)


async def test_delivery_signed_retried_and_recorded(env: Env, receiver: Receiver) -> None:
    await env.apply("t.yaml", _target_yaml(receiver.url))
    record = await env.resource(WEBHOOK_TARGET.schema, "com.example.hook")
    assert record.status["phase"] == "Ready"
    assert SECRET not in str(record.spec)  # stored only encrypted
    target = WebhookTarget.from_record(record, env.tasks.secrets)
    receiver.fail_first = 1
    deliverer = env.tasks.deliverer
    outcome = await deliverer.deliver(target, "dataset.ref.updated", {"dataset": "x"})
    assert outcome.delivered and outcome.attempts == 2
    assert receiver.bad == []
    assert receiver.received[0]["type"] == "dataset.ref.updated"
    assert receiver.received[0]["data"] == {"dataset": "x"}
    assert receiver.ids == [outcome.message_id] * 2  # the same id on the retry
    [row] = await env.deliveries.list(record.id)
    assert (row.state, row.attempts, row.last_status) == ("delivered", 2, 204)

    # A receiver holding another secret refuses the signature: not retried, recorded as failed.
    receiver.secret = "whsec_b3RoZXI="
    outcome = await deliverer.deliver(target, "flow.run", {})
    assert not outcome.delivered and outcome.attempts == 1 and outcome.status == 401
    status = (await env.resource(WEBHOOK_TARGET.schema, "com.example.hook")).status
    assert status["conditions"][LAST_DELIVERY]["status"] == "False"


async def test_target_down_ends_in_a_recorded_failure(env: Env) -> None:
    await env.apply("t.yaml", _target_yaml("http://127.0.0.1:9/hook/"))
    record = await env.resource(WEBHOOK_TARGET.schema, "com.example.hook")
    target = WebhookTarget.from_record(record, env.tasks.secrets)
    outcome = await env.tasks.deliverer.deliver(target, "flow.run", {})
    assert not outcome.delivered and outcome.attempts == 3
    [row] = await env.deliveries.list()
    assert row.state == "failed" and row.attempts == 3 and row.error
    condition = (await env.resource(WEBHOOK_TARGET.schema, record.name)).status["conditions"]
    assert condition[LAST_DELIVERY]["attempts"] == 3


FLOW_CRON = """\
$schema: Flow
headers: {{name: {name}}}
spec:
  target: Dataset:%
  triggers: [{{kind: Schedule, cron: "{cron}"}}]
  tasks: [{{kind: WebhookCall, target: com.example.hook}}]
"""


async def test_cron_flow_fires_on_the_clock_and_bad_cron_is_refused(
    env: Env, receiver: Receiver
) -> None:
    await env.apply("t.yaml", _target_yaml(receiver.url))
    await env.apply("bad.yaml", FLOW_CRON.format(name="bad", cron="61 * * * *"))
    bad = await env.resource(FLOW.schema, "bad")
    assert bad.status["phase"] == "Failed"
    condition = bad.status["conditions"][RECONCILE_ERROR]
    assert condition["code"] == "invalid-cron"
    assert "minute field '61' is outside 0-59" in condition["message"]

    await env.apply("f.yaml", FLOW_CRON.format(name="every5", cron="*/5 * * * *"))
    assert (await env.resource(FLOW.schema, "every5")).status["phase"] == "Ready"
    assert await env.runner.tick() == []  # 10:07: next is 10:10
    env.clock[0] = T0 + timedelta(minutes=2)
    assert await env.runner.tick() == []
    env.clock[0] = T0 + timedelta(minutes=3)  # 10:10
    [run_id] = await env.runner.tick()
    assert await env.runner.tick() == []  # once per cron time
    [run] = await env.runs.list()
    assert (run.run_id, run.state, run.trigger, run.error) == (
        run_id,
        "succeeded",
        "schedule",
        None,
    )
    assert run.started_at == T0 + timedelta(minutes=3)
    assert receiver.received[0]["type"] == "flow.run"
    status = (await env.resource(FLOW.schema, "every5")).status
    assert status["conditions"][LAST_RUN]["state"] == "succeeded"
    assert status["conditions"][LAST_RUN]["status"] == "True"  # `odfd get`'s table: LastRun=True


async def test_failing_flow_backs_off_and_shows_failing(env: Env) -> None:
    await env.apply("t.yaml", _target_yaml("http://127.0.0.1:9/hook/"))
    await env.apply("f.yaml", FLOW_CRON.format(name="every", cron="* * * * *"))
    await env.runner.tick()
    env.clock[0] = T0 + timedelta(minutes=1)
    [first] = await env.runner.tick()
    status = (await env.resource(FLOW.schema, "every")).status
    failing = status["conditions"][FAILING]
    assert failing["consecutiveFailures"] == 1
    assert "failed after 3 attempt(s)" in failing["message"]
    env.clock[0] = T0 + timedelta(minutes=1, seconds=59)  # within the 60 s back-off
    assert await env.runner.tick() == []
    env.clock[0] = T0 + timedelta(minutes=3)
    [second] = await env.runner.tick()
    runs = await env.runs.list()
    assert [(r.run_id, r.state) for r in runs] == [(second, "failed"), (first, "failed")]
    status = (await env.resource(FLOW.schema, "every")).status
    assert status["conditions"][FAILING]["consecutiveFailures"] == 2
    assert status["conditions"][LAST_RUN]["status"] == "False"
    assert status["phase"] == "Ready"  # the spec is fine; its runs are what fail


async def test_compaction_flow_fired_by_dataset_ref_updated(env: Env) -> None:
    await root_with_slices(env.workspace, "nums", [[1, 2], [3], [4, 5]])
    await root_with_slices(env.workspace, "other", [[1], [2]])
    text = (EXAMPLES / "flow-compact" / "flow.yaml").read_text()
    # The example selects roots by a `kind: Root` label of their Dataset resource; label ours.
    await env.apply("flow.yaml", text.replace("name: '%'", "name: 'num%'"))
    assert (await env.resource(FLOW.schema, "compact-all-roots")).status["phase"] == "Ready"
    assert await env.runner.dataset_updated("nums", {"type": "dataset.ref.updated"}) == []
    await env.apply(
        "ds.yaml",
        "$schema: Dataset\nheaders: {name: nums, labels: {kind: Root}}\nspec: {kind: Root, metadata: []}\n",
    )
    dataset = await env.workspace.get_dataset("nums")
    blocks_before = len([b async for b in dataset.chain.iter_blocks()])
    [run_id] = await env.runner.dataset_updated("nums", {"type": "dataset.ref.updated"})
    [run] = await env.runs.list()
    assert run.state == "succeeded", run.error
    blocks_after = len([b async for b in dataset.chain.iter_blocks()])
    assert blocks_after == blocks_before - 2  # three data slices became one
    assert await env.runner.dataset_updated("other", {"type": "dataset.ref.updated"}) == []
    # Inside the 10 min cooldown an update is held, then fires when the cooldown ends.
    env.clock[0] = T0 + timedelta(minutes=5)
    assert await env.runner.dataset_updated("nums", {"type": "dataset.ref.updated"}) == []
    assert await env.runner.tick() == []
    env.clock[0] = T0 + timedelta(minutes=10)
    [held] = await env.runner.tick()
    assert held > run_id


async def test_spec_examples_of_flows_and_webhooks_apply(env: Env) -> None:
    for folder in ("flow-gc", "flow-compact", "sink-webhook-dataset-events"):
        for path in sorted((EXAMPLES / folder).glob("*.yaml")):
            if "canonical" in path.name:
                continue
            await apply_manifests(env.workspace, load_manifests([path]))
    await Reconciler(env.workspace, SyncConfig()).reconcile_all()
    for name in ("gc-datasets", "compact-all-roots", "sensor.temp.http"):
        assert (await env.resource(FLOW.schema, name)).status["phase"] == "Ready", name
    # The example's secret is a `<jwe>` placeholder: Failed, saying so.
    target = await env.resource(WEBHOOK_TARGET.schema, "com.example.hook")
    assert target.status["phase"] == "Failed"
    assert (
        "not a JWE this node can decrypt" in target.status["conditions"][RECONCILE_ERROR]["message"]
    )
    # The GC flow runs on its @daily schedule.
    await env.runner.tick()
    env.clock[0] = datetime(2026, 3, 3, tzinfo=UTC)
    started = await env.runner.tick()
    assert len(started) == 1
    runs = await env.runs.list()
    assert runs[0].flow_name == "gc-datasets" and runs[0].state == "succeeded", runs[0].error


async def test_daemon_delivers_the_examples_webhook_on_a_head_move(
    env: Env, receiver: Receiver
) -> None:
    """The spec's sink-webhook-dataset-events example, its target adapted to a local receiver:
    the daemon's head-move hook fires the flow, which posts the signed event."""
    folder = EXAMPLES / "sink-webhook-dataset-events"
    await env.apply("dataset.yaml", (folder / "dataset.yaml").read_text())
    await env.apply("flow.yaml", (folder / "flow.yaml").read_text())
    target = (folder / "webhook-target.yaml").read_text()
    target = target.replace("https://example.com/hook/", receiver.url)
    target = target.replace("    contentEncoding: jwe\n", "")  # a plain secret, encrypted on apply
    await env.apply("target.yaml", target.replace("value: <jwe>", f"value: {SECRET}"))
    assert (await env.resource(WEBHOOK_TARGET.schema, "com.example.hook")).status[
        "phase"
    ] == "Ready"
    record = await env.workspace.catalog.find_by_alias("ca.bankofcanada")
    assert record is not None
    daemon = Daemon(env.node)
    await daemon._ref_updated(record.id, "sync")
    [delivered] = receiver.received
    assert receiver.bad == []
    assert delivered["type"] == "dataset.ref.updated"
    assert delivered["data"]["datasetAlias"] == "ca.bankofcanada"
    assert delivered["data"]["datasetId"] == str(record.id)
    [run] = await FlowRunTable(env.workspace.catalog).list()
    assert (run.flow_name, run.trigger, run.state) == ("sensor.temp.http", "event", "succeeded")
