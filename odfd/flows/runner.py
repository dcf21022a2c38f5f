"""Running ``Flow`` resources: fire their triggers, run their tasks, record each run.

The daemon calls :meth:`FlowRunner.tick` on a timer and :meth:`FlowRunner.dataset_updated`
when a dataset's head moves. A ``Schedule`` trigger fires at each cron time (the first one after
the runner first saw the flow: a restart does not replay missed times); an ``Event`` trigger
fires on ``dataset.ref.updated`` of a targeted dataset, at most once per ``cooldown``: an event
inside the cooldown is held and fires when it ends; a ``Source`` trigger fires when its pushed
Source's buffer holds ``minRecordsToAwait`` records or its oldest has waited ``maxAwaitInterval``
(checked on each tick and when records arrive, :meth:`FlowRunner.source_pushed`). Each run is a ``flow_runs`` row (state,
start, end, error) and the flow's ``LastRun`` condition; a failing flow backs off exponentially
(triggers held meanwhile) and carries a ``Failing`` condition until a run succeeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from odfd.app.resource_types import FLOW
from odfd.app.resources import CONDITION_BASE
from odfd.errors import OdfdError
from odfd.flows.payload import RunContext
from odfd.flows.spec import (
    EventTrigger,
    FlowSpec,
    FlowSpecError,
    ScheduleTrigger,
    SourceTrigger,
    Task,
)
from protocol.errors import OdfError
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.resources import ResourceRecord, ResourceTable

log = logging.getLogger(__name__)

LAST_RUN = CONDITION_BASE + "LastRun"
FAILING = CONDITION_BASE + "Failing"


class TaskExecutor(Protocol):
    """Runs one task of a flow for the datasets it targets (those named by ``datasets``)."""

    async def run(
        self,
        task: Task,
        datasets: list[str],
        event: dict[str, Any] | None,
        *,
        context: RunContext | None = None,
    ) -> None: ...


class PendingSources(Protocol):
    """What waits in pushed Sources' buffers: ``(records, age of the oldest in seconds)``."""

    def pending(self, source_name: str) -> tuple[int, float | None]: ...


class _NoSources:
    def pending(self, source_name: str) -> tuple[int, float | None]:
        return 0, None


class TargetLister(Protocol):
    """The datasets a flow's selector matches now (by name pattern and resource labels)."""

    async def datasets(self, spec: FlowSpec) -> list[str]: ...


@dataclass
class _FlowState:
    generation: int
    next_due: dict[int, datetime] = field(default_factory=dict)
    """Next firing time of each Schedule trigger, by its index."""
    last_event_fire: datetime | None = None
    held_events: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Datasets whose update waits for a cooldown (or a back-off) to end."""
    failures: int = 0
    blocked_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class BackOff:
    first: float = 30.0
    factor: float = 2.0
    max: float = 3600.0

    def after(self, failures: int) -> timedelta:
        return timedelta(seconds=min(self.max, self.first * self.factor ** (failures - 1)))


class FlowRunner:
    def __init__(
        self,
        resources: ResourceTable,
        runs: FlowRunTable,
        executor: TaskExecutor,
        targets: TargetLister,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        back_off: BackOff | None = None,
        sources: PendingSources | None = None,
    ) -> None:
        self.sources = sources or _NoSources()
        self.resources = resources
        self.runs = runs
        self.executor = executor
        self.targets = targets
        self.clock = clock
        self.back_off = back_off or BackOff()
        self._state: dict[str, _FlowState] = {}
        self._lock = asyncio.Lock()
        """One run at a time: a timer tick and a head move never run a flow twice at once."""

    async def _flows(self) -> list[tuple[ResourceRecord, FlowSpec, _FlowState]]:
        found = []
        seen = set()
        for record in await self.resources.list(FLOW.schema):
            try:
                spec = FlowSpec.from_json(record.spec, f"Flow {record.name}")
            except (FlowSpecError, OdfError):
                continue  # its controller says why it is Failed
            state = self._state.get(record.id)
            if state is None or state.generation != record.generation:
                state = self._state[record.id] = _FlowState(record.generation)
            seen.add(record.id)
            found.append((record, spec, state))
        for gone in set(self._state) - seen:
            del self._state[gone]
        return found

    async def tick(self) -> list[int]:
        """Run what is due now: schedule times reached, held events whose wait ended."""
        async with self._lock:
            return await self._tick()

    async def _tick(self) -> list[int]:
        now = self.clock()
        started = []
        for record, spec, state in await self._flows():
            due = False
            for index, trigger in enumerate(spec.triggers):
                if not isinstance(trigger, ScheduleTrigger):
                    continue
                at = state.next_due.setdefault(index, trigger.cron.next_after(now))
                if at <= now and not self._blocked(state, now):
                    due = True
                    state.next_due[index] = trigger.cron.next_after(now)
            if due:
                started.append(await self._run(record, spec, state, "schedule", None))
            elif self._source_due(spec) and not self._blocked(state, now):
                started.append(await self._run(record, spec, state, "source", None))
            if state.held_events and self._event_may_fire(spec, state, now):
                held = state.held_events
                state.held_events = {}
                started.append(await self._fire_events(record, spec, state, held))
        return started

    async def source_pushed(self) -> list[int]:
        """Records arrived at a pushed Source: run the flows whose Source trigger is now due."""
        return await self.tick()

    def _source_due(self, spec: FlowSpec) -> bool:
        for trigger in spec.triggers:
            if isinstance(trigger, SourceTrigger):
                count, age = self.sources.pending(trigger.source)
                if count >= trigger.min_records or (
                    count
                    and trigger.max_wait is not None
                    and age is not None
                    and age >= trigger.max_wait
                ):
                    return True
        return False

    async def dataset_updated(self, dataset: str, event: dict[str, Any]) -> list[int]:
        """A dataset's head moved: fire (or hold) the Event triggers of flows targeting it."""
        async with self._lock:
            return await self._dataset_updated(dataset, event)

    async def _dataset_updated(self, dataset: str, event: dict[str, Any]) -> list[int]:
        now = self.clock()
        started = []
        for record, spec, state in await self._flows():
            if not any(isinstance(t, EventTrigger) for t in spec.triggers):
                continue
            if dataset not in await self.targets.datasets(spec):
                continue
            if self._event_may_fire(spec, state, now):
                started.append(await self._fire_events(record, spec, state, {dataset: event}))
            else:
                state.held_events[dataset] = event
        return started

    def _event_may_fire(self, spec: FlowSpec, state: _FlowState, now: datetime) -> bool:
        if self._blocked(state, now):
            return False
        cooldown = max(
            (t.cooldown for t in spec.triggers if isinstance(t, EventTrigger)), default=0.0
        )
        last = state.last_event_fire
        return last is None or now >= last + timedelta(seconds=cooldown)

    @staticmethod
    def _blocked(state: _FlowState, now: datetime) -> bool:
        return state.blocked_until is not None and now < state.blocked_until

    async def _fire_events(
        self,
        record: ResourceRecord,
        spec: FlowSpec,
        state: _FlowState,
        events: dict[str, dict[str, Any]],
    ) -> int:
        state.last_event_fire = self.clock()
        return await self._run(record, spec, state, "event", events)

    async def _run(
        self,
        record: ResourceRecord,
        spec: FlowSpec,
        state: _FlowState,
        trigger: str,
        events: dict[str, dict[str, Any]] | None,
    ) -> int:
        started_at = self.clock()
        run_id = await self.runs.start(record.id, record.name, trigger, started_at)
        error: str | None = None
        try:
            datasets = sorted(events) if events else await self.targets.datasets(spec)
            event = None if not events else next(iter(events.values()))
            context = RunContext(record.id, record.name, run_id, trigger, event, tuple(datasets))
            for task in spec.tasks:
                await self.executor.run(task, datasets, event, context=context)
        except (OdfdError, OdfError, OSError) as err:
            error = f"{type(err).__name__}: {err}"
        finished_at = self.clock()
        await self.runs.finish(run_id, "failed" if error else "succeeded", finished_at, error)
        conditions: dict[str, Any] = {
            LAST_RUN: {
                "status": "False" if error else "True",
                "runId": run_id,
                "state": "failed" if error else "succeeded",
                "trigger": trigger,
                "startedAt": started_at.isoformat(),
                "finishedAt": finished_at.isoformat(),
                **({"message": error} if error else {}),
            }
        }
        if error is None:
            state.failures, state.blocked_until = 0, None
            conditions[FAILING] = None
        else:
            state.failures += 1
            state.blocked_until = finished_at + self.back_off.after(state.failures)
            conditions[FAILING] = {
                "status": "True",
                "consecutiveFailures": state.failures,
                "retryAfter": state.blocked_until.isoformat(),
                "message": error,
            }
            log.warning(
                "flow run failed", extra={"flow": record.name, "run": run_id, "error": error}
            )
        await self.resources.update_status(record.id, conditions=conditions)
        return run_id
