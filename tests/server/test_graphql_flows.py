"""``Dataset.flows.runs`` over raw HTTP against a served node: the runs a real flow runner (the
daemon's, as :mod:`odfd.app.node_flows` puts it together) recorded for ``Flow`` resources, with
the reference's status, outcome and timing, paged and filtered; a run of a flow that does not
select the dataset is not found; a private dataset has no flows for who may not read it; flow
mutations and the fields not served are refused by name."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from odfd.app.node import Node
from odfd.app.node_flows import flow_runner
from odfd.app.resource_types import FLOW
from odfd.app.resources import apply_manifests, parse_manifest
from odfd.config import NodeConfig
from odfd.sources.buffers import SourceBuffers
from protocol.identity import DatasetId
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace
from tests.server.graphql_node import READ_TOKEN, Served, serve
from tests.server.odata_node import PRIVATE, SERVER, add_datasets

WEATHER = "alice/weather"
UPDATED = {"type": "dataset.ref.updated"}
RUNNING_SINCE = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def flow(name: str, target: str, task: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": FLOW.schema,
        "headers": {"name": name},
        "spec": {
            "target": f"Dataset:{target}",
            "triggers": [{"kind": "Event", "events": {"type": "dataset.ref.updated"}}],
            "tasks": [task],
        },
    }


FLOWS = [
    flow("gc-weather", WEATHER, {"kind": "GarbageCollection"}),
    flow("hook-alice", "alice/%", {"kind": "WebhookCall", "target": "no-such-target"}),
    flow("gc-secret", PRIVATE, {"kind": "GarbageCollection"}),
    flow("nightly", "foo.bar", {"kind": "GarbageCollection"}),
    {
        "$schema": FLOW.schema,
        "headers": {"name": "compact-empty"},
        "spec": {
            "target": "Dataset:alice/empty",
            "triggers": [
                {"kind": "Schedule", "cron": "@daily"},
                {"kind": "Event", "events": {"type": "dataset.ref.updated"}},
            ],
            "tasks": [{"kind": "Compaction", "params": {"maxSliceRecords": 500}}],
        },
    },
]


async def add_with_flow_runs(workspace: Workspace) -> None:
    """The datasets, the flows, and their runs: three updates of ``alice/weather`` (the failing
    webhook flow runs once, then backs off), one of the private dataset, and a run of
    ``nightly`` still going."""
    await add_datasets(workspace)
    await apply_manifests(workspace, [parse_manifest(m, m["headers"]["name"]) for m in FLOWS])
    node = Node(workspace, NodeConfig(server=SERVER))

    async def moved(_dataset: DatasetId) -> None:
        return None

    runner = flow_runner(node, SourceBuffers(), moved=moved)
    for _ in range(3):
        await runner.dataset_updated(WEATHER, UPDATED)
    await runner.dataset_updated(PRIVATE, UPDATED)
    nightly = next(
        r for r in await ResourceTable(workspace.catalog).list(FLOW.schema) if r.name == "nightly"
    )
    await FlowRunTable(workspace.catalog).start(nightly.id, "nightly", "schedule", RUNNING_SINCE)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("graphql-flows")) / "ws"
    yield from serve(root, add=add_with_flow_runs)


LIST = """query($account: AccountName!, $name: DatasetName!, $page: Int, $perPage: Int,
                 $filters: DatasetFlowFilters) {
  datasets { byOwnerAndName(accountName: $account, datasetName: $name) { id flows { runs {
    listFlows(page: $page, perPage: $perPage, filters: $filters) {
      totalCount pageInfo { hasNextPage hasPreviousPage currentPage totalPages }
      edges { node { flowId } }
      nodes { flowId datasetId status initiator { accountName }
        description { __typename ... on FlowDescriptionUnknown { message } }
        outcome { __typename
          ... on FlowSuccessResult { message }
          ... on FlowFailedError { reason { __typename
            ... on TaskFailureReasonGeneral { message recoverable } } } }
        timing { initiatedAt firstAttemptScheduledAt scheduledAt awaitingExecutorSince
                 runningSince lastAttemptFinishedAt completedAt } } } } } } } }"""
GET = """query($account: AccountName!, $name: DatasetName!, $flowId: FlowID!) {
  datasets { byOwnerAndName(accountName: $account, datasetName: $name) { flows { runs {
    getFlow(flowId: $flowId) { __typename message
      ... on GetFlowSuccess { flow { flowId status outcome { __typename } } }
      ... on FlowNotFound { flowId } } } } } } }"""


def ask(served: Served, query: str, token: str | None = None, **variables: Any) -> Any:
    status, answer = served.post(query, token, variables=variables)
    assert status == 200, answer
    return answer


def runs(served: Served, alias: str, token: str | None = None, **variables: Any) -> Any:
    account, _, name = alias.rpartition("/")
    answer = ask(served, LIST, token, account=account or "kamu", name=name, **variables)
    assert "errors" not in answer, answer
    dataset = answer["data"]["datasets"]["byOwnerAndName"]
    return None if dataset is None else dataset["flows"]["runs"]["listFlows"]


def test_runs_of_the_flows_selecting_a_dataset_newest_first(served: Served) -> None:
    found = runs(served, WEATHER)
    assert found["totalCount"] == 4
    nodes = found["nodes"]
    ids = [int(node["flowId"]) for node in nodes]
    assert ids == sorted(ids, reverse=True)
    assert [e["node"]["flowId"] for e in found["edges"]] == [n["flowId"] for n in nodes]
    statuses = [(n["status"], (n["outcome"] or {}).get("__typename")) for n in nodes]
    assert statuses == [("FINISHED", "FlowSuccessResult")] * 2 + [
        ("FINISHED", "FlowFailedError"),
        ("FINISHED", "FlowSuccessResult"),
    ]
    success, failed = nodes[0], nodes[2]
    assert success["outcome"]["message"] == "SUCCESS"
    assert success["description"]["message"] == "Flow gc-weather (fired by event)"
    reason = failed["outcome"]["reason"]
    assert reason["__typename"] == "TaskFailureReasonGeneral"
    assert "no-such-target" in reason["message"] and reason["recoverable"] is True
    assert failed["description"]["message"] == "Flow hook-alice (fired by event)"
    ids_dataset = {n["datasetId"] for n in nodes}
    assert len(ids_dataset) == 1 and ids_dataset.pop().startswith("did:odf:")
    for node in nodes:
        timing = node["timing"]
        assert timing["initiatedAt"] == timing["runningSince"]
        assert timing["completedAt"] == timing["lastAttemptFinishedAt"]
        assert timing["initiatedAt"] <= timing["completedAt"]
        assert timing["initiatedAt"].endswith("Z")
        assert (timing["scheduledAt"], timing["firstAttemptScheduledAt"]) == (None, None)
        assert timing["awaitingExecutorSince"] is None
        assert node["initiator"] is None


def test_runs_are_those_the_runner_recorded(served: Served) -> None:
    """Each listed run's state and times are the catalog's row of it."""
    import asyncio

    async def rows() -> Any:
        async with await Workspace.open(served.root) as workspace:
            return await FlowRunTable(workspace.catalog).list(limit=100)

    by_id = {run.run_id: run for run in asyncio.run(rows())}
    for node in runs(served, WEATHER)["nodes"]:
        row = by_id[int(node["flowId"])]
        assert row.flow_name in ("gc-weather", "hook-alice")
        assert (row.state == "succeeded") == (node["outcome"]["__typename"] == "FlowSuccessResult")
        assert node["timing"]["initiatedAt"][:19] == row.started_at.isoformat()[:19]
        assert row.finished_at is not None
        assert node["timing"]["completedAt"][:19] == row.finished_at.isoformat()[:19]


def test_a_run_in_progress_is_running_without_outcome(served: Served) -> None:
    [node] = runs(served, "foo.bar")["nodes"]
    assert node["status"] == "RUNNING" and node["outcome"] is None
    assert node["timing"]["initiatedAt"] == "2026-11-29T08:00:00Z"
    assert node["timing"]["completedAt"] is None
    assert runs(served, "foo.bar", filters={"byStatus": ["FINISHED"]})["totalCount"] == 0
    running = runs(served, "foo.bar", filters={"byStatus": ["RUNNING", "WAITING"]})
    assert running["totalCount"] == 1


def test_pages_and_filters(served: Served) -> None:
    first = runs(served, WEATHER, perPage=3)
    assert first["pageInfo"] == {
        "hasNextPage": True,
        "hasPreviousPage": False,
        "currentPage": 0,
        "totalPages": 2,
    }
    second = runs(served, WEATHER, page=1, perPage=3)
    assert second["pageInfo"]["hasNextPage"] is False and second["totalCount"] == 4
    every = [n["flowId"] for n in runs(served, WEATHER)["nodes"]]
    assert [n["flowId"] for n in first["nodes"] + second["nodes"]] == every
    assert runs(served, WEATHER, filters={"byStatus": ["WAITING", "RETRYING"]})["nodes"] == []
    finished = runs(served, WEATHER, filters={"byStatus": ["FINISHED"]})
    assert finished["totalCount"] == 4
    assert runs(served, WEATHER, filters={"byInitiator": {"system": True}})["totalCount"] == 4
    by_account = runs(served, WEATHER, filters={"byInitiator": {"accounts": ["did:odf:x"]}})
    assert by_account["totalCount"] == 0
    answer = ask(served, LIST, account="alice", name="weather", perPage=0)
    assert answer["errors"][0]["message"] == "perPage must be 1 or more, not 0"


def test_a_flow_selecting_several_datasets_lists_its_runs_for_each(served: Served) -> None:
    """``hook-alice`` selects ``alice/%``: its run is listed for ``alice/empty`` too (runs are
    recorded per flow)."""
    [node] = runs(served, "alice/empty")["nodes"]
    assert node["outcome"]["__typename"] == "FlowFailedError"
    assert node["flowId"] in {n["flowId"] for n in runs(served, WEATHER)["nodes"]}


def test_get_flow(served: Served) -> None:
    newest = runs(served, WEATHER)["nodes"][0]["flowId"]
    answer = ask(served, GET, account="alice", name="weather", flowId=newest)
    got = answer["data"]["datasets"]["byOwnerAndName"]["flows"]["runs"]["getFlow"]
    assert got == {
        "__typename": "GetFlowSuccess",
        "message": "Success",
        "flow": {
            "flowId": newest,
            "status": "FINISHED",
            "outcome": {"__typename": "FlowSuccessResult"},
        },
    }
    answer = ask(served, GET, account="alice", name="weather", flowId=int(newest))
    got = answer["data"]["datasets"]["byOwnerAndName"]["flows"]["runs"]["getFlow"]
    assert got["flow"]["flowId"] == newest  # the number sent as a JSON number
    nightly = runs(served, "foo.bar")["nodes"][0]["flowId"]
    for other in (nightly, "999999", "not-a-number"):
        answer = ask(served, GET, account="alice", name="weather", flowId=other)
        got = answer["data"]["datasets"]["byOwnerAndName"]["flows"]["runs"]["getFlow"]
        assert got == {
            "__typename": "FlowNotFound",
            "message": f"Flow '{other}' was not found",
            "flowId": other,
        }


def test_a_private_dataset_has_no_flows_for_who_may_not_read_it(served: Served) -> None:
    assert runs(served, PRIVATE) is None
    found = runs(served, PRIVATE, READ_TOKEN)
    assert found["totalCount"] == 1
    assert found["nodes"][0]["description"]["message"] == "Flow gc-secret (fired by event)"


SETTINGS = """query($account: AccountName!, $name: DatasetName!, $type: DatasetFlowType!) {
  datasets { byOwnerAndName(accountName: $account, datasetName: $name) { flows {
    configs { byType(datasetFlowType: $type) { retryPolicy { maxAttempts }
      rule { __typename ... on FlowConfigRuleCompaction { maxSliceSize maxSliceRecords } } } }
    triggers { byType(datasetFlowType: $type) { paused
      schedule { __typename ... on Cron5ComponentExpression { cron5ComponentExpression } }
      reactive { forBreakingChange forNewData { __typename } }
      stopPolicy { __typename } } } } } } }"""


def settings(served: Served, alias: str, flow_type: str, token: str | None = None) -> Any:
    account, _, name = alias.rpartition("/")
    answer = ask(served, SETTINGS, token, account=account or "kamu", name=name, type=flow_type)
    assert "errors" not in answer, answer
    dataset = answer["data"]["datasets"]["byOwnerAndName"]
    return None if dataset is None else dataset["flows"]


def test_a_compaction_flow_is_the_datasets_hard_compaction_config_and_trigger(
    served: Served,
) -> None:
    found = settings(served, "alice/empty", "HARD_COMPACTION")
    assert found["configs"]["byType"] == {
        "retryPolicy": None,
        "rule": {
            "__typename": "FlowConfigRuleCompaction",
            "maxSliceSize": 300_000_000,  # odfd compact's default, as the runs use it
            "maxSliceRecords": 500,
        },
    }
    assert found["triggers"]["byType"] == {
        "paused": False,
        "schedule": {
            "__typename": "Cron5ComponentExpression",
            "cron5ComponentExpression": "0 0 * * *",
        },
        "reactive": {
            "forBreakingChange": "NO_ACTION",
            "forNewData": {"__typename": "FlowTriggerBatchingRuleImmediate"},
        },
        "stopPolicy": {"__typename": "FlowTriggerStopPolicyNever"},
    }


def test_flow_types_no_odfd_flow_does_have_no_config_or_trigger(served: Served) -> None:
    for alias, flow_type in (
        ("alice/empty", "INGEST"),
        ("alice/empty", "EXECUTE_TRANSFORM"),
        ("foo.bar", "HARD_COMPACTION"),
        (WEATHER, "RESET"),
    ):
        found = settings(served, alias, flow_type)
        assert found == {"configs": {"byType": None}, "triggers": {"byType": None}}, alias
    assert settings(served, PRIVATE, "HARD_COMPACTION") is None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (
            'mutation { datasets { byId(datasetId: "did:odf:x") { flows { runs { '
            "triggerIngestFlow { message } } } } } }",
            "flows",
        ),
        (
            '{ datasets { byOwnerAndName(accountName: "alice", datasetName: "weather") { '
            "flows { processes { primary { flowType } } } } } }",
            "processes",
        ),
        (
            '{ datasets { byOwnerAndName(accountName: "alice", datasetName: "weather") { '
            "flows { runs { listFlowInitiators { totalCount } } } } } }",
            "listFlowInitiators",
        ),
        (
            '{ datasets { byOwnerAndName(accountName: "alice", datasetName: "weather") { '
            "flows { runs { listFlows { nodes { taskIds } } } } } } }",
            "taskIds",
        ),
    ],
)
def test_what_is_not_served_is_refused_by_name(served: Served, query: str, field: str) -> None:
    answer = ask(served, query)
    assert answer.get("data") is None
    assert any(f"Cannot query field '{field}'" in e["message"] for e in answer["errors"]), answer
