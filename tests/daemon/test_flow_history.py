"""A ``WebhookCall``'s payload templates rendered for each run (values never change the payload's
structure; a bad template fails the Flow at apply, naming it), and the runs and deliveries
listed by ``odfd get flowruns`` / ``webhookdeliveries``."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest

from odfd.app.flow_history import HistoryQuery, flow_runs, webhook_deliveries
from odfd.app.resource_types import FLOW
from odfd.app.resources import RECONCILE_ERROR
from odfd.cli.main import main
from odfd.flows.payload import Payload, PayloadError, RunContext
from storage.catalog.resources import ResourceNotFoundError
from tests.daemon.test_flows_webhooks import (  # noqa: F401 (env, receiver: fixtures shared)
    SECRET,
    Env,
    Receiver,
    _target_yaml,
    env,
    receiver,
)

CONTEXT = RunContext(
    "f-1",
    "hourly",
    7,
    "event",
    {"type": "dataset.ref.updated", "datasetAlias": 'odd"name', "n": 3},
    ("a", "b"),
)


def test_a_whole_template_is_the_value_itself() -> None:
    assert Payload.parse("${{ trigger.event }}", "p").render(CONTEXT) == dict(CONTEXT.event or {})
    assert Payload.parse("${{ run.id }}", "p").render(CONTEXT) == 7
    assert Payload.parse("${{ datasets }}", "p").render(CONTEXT) == ["a", "b"]


def test_json_payloads_are_rendered_inside_their_structure() -> None:
    text = json.dumps(
        {
            "text": "flow ${{ flow.name }} run ${{ run.id }}: ${{ trigger.event.datasetAlias }}",
            "alias": "${{ trigger.event.datasetAlias }}",
            "count": "${{ trigger.event.n }}",
            "missing": "${{ trigger.event.nope || 'none' }}",
            "${{ flow.name }}": ["${{ trigger.kind }}"],
        }
    )
    rendered = Payload.parse(text, "p").render(CONTEXT)
    assert rendered == {
        "text": 'flow hourly run 7: odd"name',
        "alias": 'odd"name',  # a quote in a value stays inside its string
        "count": 3,
        "missing": "none",
        "hourly": ["event"],
    }
    assert Payload.parse("moved: ${{ trigger.event.datasetAlias }}", "p").render(CONTEXT) == (
        'moved: odd"name'
    )
    scheduled = RunContext("f-1", "hourly", 8, "schedule", None, ())
    assert Payload.parse("${{ trigger.event.datasetAlias }}", "p").render(scheduled) is None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("${{ env.HOME }}", "looks into 'env'"),
        ("${{ __import__('os') }}", "is not a path"),
        ("${{ trigger.event[0] }}", "is not a path"),
    ],
)
def test_templates_that_are_not_lookups_are_refused(payload: str, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        Payload.parse(payload, "spec.tasks[0].payload")


def _flow(payload: str) -> str:
    return (
        "$schema: Flow\nheaders: {name: notify}\nspec:\n  target: Dataset:%\n"
        "  triggers:\n    - kind: Schedule\n      cron: '0 * * * *'\n"
        f"  tasks:\n    - kind: WebhookCall\n      target: com.example.hook\n"
        f"      payload: {json.dumps(payload)}\n"
    )


async def test_a_bad_payload_fails_the_flow_naming_it(env: Env) -> None:  # noqa: F811
    await env.apply("flow.yaml", _flow("${{ secrets.token }}"))
    record = await env.resource(FLOW.schema, "notify")
    assert record.status["phase"] == "Failed"
    error = record.status["conditions"][RECONCILE_ERROR]
    assert error["code"] == "invalid-payload"
    assert "spec.tasks[0].payload" in error["message"] and "secrets" in error["message"]


async def test_scheduled_run_delivers_the_rendered_payload_and_is_listed(
    env: Env,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    await env.apply("target.yaml", _target_yaml(receiver.url))
    payload = '{"flow": "${{ flow.name }}", "run": "${{ run.id }}", "why": "${{ trigger.kind }}"}'
    await env.apply("flow.yaml", _flow(payload))
    await env.runner.tick()
    env.clock[0] += timedelta(hours=1)
    [run_id] = await env.runner.tick()
    [delivered] = receiver.received
    assert delivered["data"] == {"flow": "notify", "run": run_id, "why": "schedule"}

    [run] = await flow_runs(env.workspace, HistoryQuery("notify"))
    assert (run.run_id, run.state, run.trigger) == (run_id, "succeeded", "schedule")
    [delivery] = await webhook_deliveries(env.workspace, HistoryQuery("com.example.hook"))
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 1, 204)
    with pytest.raises(ResourceNotFoundError, match="no Flow resource nope"):
        await flow_runs(env.workspace, HistoryQuery("nope"))

    root = str(env.workspace.root)
    assert (
        await asyncio.to_thread(main, ["get", "flowruns", "notify", "-o", "json", "--root", root])
        == 0
    )
    [shown] = json.loads(capsys.readouterr().out)
    assert shown["runId"] == run_id and shown["state"] == "succeeded"
    assert await asyncio.to_thread(main, ["get", "webhookdeliveries", "--root", root]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["MESSAGE", "TARGET", "EVENT", "STATE"]
    assert "com.example.hook" in table[1] and "delivered" in table[1]
    assert SECRET not in "\n".join(table)
