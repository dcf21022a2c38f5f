"""The reference's ``Dataset.flows``: ``runs`` (``listFlows``, ``getFlow``), each run of a
``Flow`` resource that selects the dataset, and the ``configs``/``triggers`` of a flow type an
odfd flow does, read by :mod:`odfd.app.graphql_flows` and answered in the reference's types. A
run being recorded is ``RUNNING``, a succeeded or failed one ``FINISHED`` with its outcome; odfd
records a run when it starts, and backs a failing flow off rather than retrying a run, so no
run is ``WAITING`` or ``RETRYING``. Every run is fired by a trigger (no account starts one), so
``initiator`` is null."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from graphql import GraphQLError, GraphQLResolveInfo

from odfd.app import graphql_flows as flows
from protocol.model import Timestamp
from storage.catalog import DatasetRecord

DEFAULT_PER_PAGE = 15
"""Runs in a page when ``listFlows`` gives no ``perPage``, as the reference's."""
STATES_OF_STATUS = {
    "WAITING": (),
    "RUNNING": ("running",),
    "RETRYING": (),
    "FINISHED": ("succeeded", "failed"),
}
"""The recorded run states each of the reference's ``FlowStatus`` values covers."""


TASK_OF_FLOW_TYPE = {"INGEST": "Ingest", "HARD_COMPACTION": "Compaction"}
"""The task of an odfd flow that does what a kamu flow type does; odfd's daemon runs
transforms itself (not as a flow), and nothing resets a dataset."""


async def _flow_of_type(
    source: DatasetRecord, info: GraphQLResolveInfo, flow_type: str
) -> flows.DatasetFlow | None:
    """The first flow (by name) selecting the dataset that runs the type's task."""
    kind = TASK_OF_FLOW_TYPE.get(flow_type)
    ctx = info.context
    found = await flows.dataset_flows(ctx.node, ctx.visible, source)
    return next((flow for flow in found if kind in flow.task_kinds), None)


async def config_by_type(
    source: DatasetRecord, info: GraphQLResolveInfo, datasetFlowType: str
) -> dict[str, Any] | None:
    """A compaction flow's limits; an ingest's parameters are none of kamu's (no config)."""
    flow = await _flow_of_type(source, info, datasetFlowType)
    if flow is None or flow.compaction is None or datasetFlowType != "HARD_COMPACTION":
        return None
    size, records = flow.compaction
    rule = {
        "__typename": "FlowConfigRuleCompaction",
        "maxSliceSize": size,
        "maxSliceRecords": records,
    }
    return {"rule": rule, "retryPolicy": None}


async def trigger_by_type(
    source: DatasetRecord, info: GraphQLResolveInfo, datasetFlowType: str
) -> dict[str, Any] | None:
    """The flow's schedule (its cron) and, for an ``Event`` trigger without cooldown, an
    immediate reaction to new data; never paused (odfd cannot pause a flow), never stopped
    (a failing flow backs off and tries again)."""
    flow = await _flow_of_type(source, info, datasetFlowType)
    if flow is None:
        return None
    schedule = None
    if flow.cron is not None:
        schedule = {"__typename": "Cron5ComponentExpression", "cron5ComponentExpression": flow.cron}
    reactive = None
    if flow.on_update:
        reactive = {
            "forNewData": {"__typename": "FlowTriggerBatchingRuleImmediate", "dummy": True},
            "forBreakingChange": "NO_ACTION",
        }
    return {
        "paused": False,
        "schedule": schedule,
        "reactive": reactive,
        "stopPolicy": {"__typename": "FlowTriggerStopPolicyNever", "dummy": True},
    }


def _itself(source: DatasetRecord, _info: GraphQLResolveInfo) -> DatasetRecord:
    return source


Connection = Callable[[Sequence[Any], int, int, int], dict[str, Any]]


def resolvers(connection: Connection) -> dict[str, Callable[..., Any]]:
    """The fields' resolvers; ``connection`` pages as every listing here does."""

    async def list_flows(source: DatasetRecord, info: GraphQLResolveInfo, **args: Any) -> Any:
        page, per_page, found = await _list_flows(source, info, **args)
        nodes = [_flow(run, source) for run in found.runs]
        return connection(nodes, found.total, page, per_page)

    return {
        "Dataset.flows": _itself,
        "DatasetFlows.runs": _itself,
        "DatasetFlowRuns.listFlows": list_flows,
        "DatasetFlowRuns.getFlow": get_flow,
        "DatasetFlows.configs": _itself,
        "DatasetFlows.triggers": _itself,
        "DatasetFlowConfigs.byType": config_by_type,
        "DatasetFlowTriggers.byType": trigger_by_type,
    }


async def _list_flows(
    source: DatasetRecord,
    info: GraphQLResolveInfo,
    page: int | None = None,
    perPage: int | None = None,
    filters: dict[str, Any] | None = None,
) -> tuple[int, int, flows.RunPage]:
    page = 0 if page is None else page
    per_page = DEFAULT_PER_PAGE if perPage is None else perPage
    if page < 0:
        raise GraphQLError(f"page must be 0 or more, not {page}")
    if per_page < 1:
        raise GraphQLError(f"perPage must be 1 or more, not {per_page}")
    ctx = info.context
    found = await flows.dataset_runs(
        ctx.node, ctx.visible, source, states=_states(filters or {}), page=page, per_page=per_page
    )
    return page, per_page, found


def _states(filters: dict[str, Any]) -> tuple[str, ...]:
    """The run states ``filters`` keep: ``byStatus`` as above; ``byInitiator`` keeps every run
    for ``system`` (triggers fire them all) and none for ``accounts``."""
    states: tuple[str, ...] = flows.RUN_STATES
    if filters.get("byStatus") is not None:
        chosen = {state for status in filters["byStatus"] for state in STATES_OF_STATUS[status]}
        states = tuple(state for state in states if state in chosen)
    initiator = filters.get("byInitiator")
    if initiator is not None and not initiator.get("system"):
        return ()
    return states


async def get_flow(source: DatasetRecord, info: GraphQLResolveInfo, flowId: Any) -> dict[str, Any]:
    ctx = info.context
    flowId = str(flowId)  # a custom scalar: a variable may give the number as JSON's
    run_id = int(flowId) if flowId.isascii() and flowId.isdigit() else None
    run = None if run_id is None else await flows.dataset_run(ctx.node, ctx.visible, source, run_id)
    if run is None:
        return {
            "__typename": "FlowNotFound",
            "flowId": flowId,
            "message": f"Flow '{flowId}' was not found",
        }
    return {"__typename": "GetFlowSuccess", "flow": _flow(run, source), "message": "Success"}


def _flow(run: flows.FlowRun, dataset: DatasetRecord) -> dict[str, Any]:
    finished = _time(run.finished_at)
    return {
        "flowId": str(run.run_id),
        "datasetId": dataset.id,
        "description": {
            "__typename": "FlowDescriptionUnknown",
            "message": f"Flow {run.flow_name} (fired by {run.trigger})",
        },
        "status": "RUNNING" if run.state == "running" else "FINISHED",
        "outcome": _outcome(run),
        "timing": {
            "initiatedAt": _time(run.started_at),
            "runningSince": _time(run.started_at),
            "lastAttemptFinishedAt": finished,
            "completedAt": finished,
        },
        "initiator": None,
    }


def _outcome(run: flows.FlowRun) -> dict[str, Any] | None:
    if run.state == "succeeded":
        return {"__typename": "FlowSuccessResult", "message": "SUCCESS"}
    if run.state == "failed":
        reason = {
            "__typename": "TaskFailureReasonGeneral",
            "message": run.error or "failed",
            "recoverable": True,
        }
        return {"__typename": "FlowFailedError", "reason": reason}
    return None


def _time(value: datetime | None) -> Timestamp | None:
    return None if value is None else Timestamp.from_datetime(value)
