"""What flows and webhook targets did: each flow run (trigger, state, start, end, error) and each
webhook delivery (event, state, attempts, last HTTP status, error), newest first — for
``odfd get flowruns`` / ``webhookdeliveries``, the resource protocol and the console."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odfd.app.resource_service import ALL_ACCOUNTS, AccountScope, find_resource
from odfd.app.resource_types import FLOW, WEBHOOK_TARGET
from storage.catalog.flow_runs import FlowRunRecord, FlowRunTable
from storage.catalog.webhook_deliveries import DeliveryRecord, WebhookDeliveryTable
from storage.workspace import Workspace

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    owner: str | None = None
    """The flow (or webhook target) by id, DID or name; None: every one."""
    limit: int = DEFAULT_LIMIT
    scope: AccountScope = ALL_ACCOUNTS


async def flow_runs(workspace: Workspace, query: HistoryQuery) -> list[FlowRunRecord]:
    flow_id = None
    if query.owner is not None:
        flow_id = (await find_resource(workspace, FLOW.schema, query.owner, query.scope)).id
    return await FlowRunTable(workspace.catalog).list(flow_id, _limit(query))


async def webhook_deliveries(workspace: Workspace, query: HistoryQuery) -> list[DeliveryRecord]:
    target_id = None
    if query.owner is not None:
        target = await find_resource(workspace, WEBHOOK_TARGET.schema, query.owner, query.scope)
        target_id = target.id
    return await WebhookDeliveryTable(workspace.catalog).list(target_id, _limit(query))


def _limit(query: HistoryQuery) -> int:
    return max(1, min(query.limit, MAX_LIMIT))


def run_document(run: FlowRunRecord) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "flowId": run.flow_id,
        "flowName": run.flow_name,
        "trigger": run.trigger,
        "state": run.state,
        "startedAt": run.started_at.isoformat(),
        "finishedAt": None if run.finished_at is None else run.finished_at.isoformat(),
        "error": run.error,
    }


def delivery_document(delivery: DeliveryRecord) -> dict[str, Any]:
    return {
        "messageId": delivery.message_id,
        "targetId": delivery.target_id,
        "targetName": delivery.target_name,
        "eventType": delivery.event_type,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "lastStatus": delivery.last_status,
        "error": delivery.error,
        "createdAt": delivery.created_at.isoformat(),
        "finishedAt": None if delivery.finished_at is None else delivery.finished_at.isoformat(),
    }
