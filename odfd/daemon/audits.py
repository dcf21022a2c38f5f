"""Audits: the daemon's schedule of ``odfd verify`` (``odfd.app.dataset_audit``), its JSON
reports stored, datasets marked failing.

Two scopes: ``integrity`` (metadata + data layers) after every sync or transform that moved a
dataset's head, incremental (only data files new or changed since they last verified are read),
and ``full`` (all layers, reproducibility included, every file read again) on the ``[audit]
interval`` schedule, which resumes after a restart from the last full audit recorded in the
catalog.
Requests for a dataset already waiting are merged (a full audit covers an integrity one).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Hashable
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta

from odfd.app.dataset_audit import audit_dataset, needs_engine
from odfd.app.engine_jobs import cancellable_engine_work
from odfd.app.node import Node
from odfd.config import NodeConfig
from odfd.daemon.jobs import JobRunner
from odfd.daemon.metrics import DaemonMetrics
from protocol.identity import DatasetId
from storage.catalog.audit_records import AuditRecord, Scope
from storage.catalog.audits import AuditTable
from storage.crashpoints import crash_point

log = logging.getLogger(__name__)

ResultListener = Callable[[AuditRecord], Awaitable[None]]
#: Applies an audit's verdict to what the node serves, before the record is visible to readers.
VerdictListener = Callable[[AuditRecord], None]


class Auditor:
    """Runs the audits of the daemon's node (``current``: the node a reload swapped in, whose
    workspace and engines stay the same)."""

    def __init__(
        self,
        current: Callable[[], Node],
        config: NodeConfig,
        metrics: DaemonMetrics,
        spark_gate: asyncio.Semaphore,
        on_result: ResultListener,
        on_verdict: VerdictListener,
    ) -> None:
        self._current = current
        self.workspace = current().workspace
        self.config = config
        self.metrics = metrics
        self.table = AuditTable(self.workspace.catalog)
        self._spark_gate = spark_gate
        self._on_result = on_result
        self._on_verdict = on_verdict
        self._pending: dict[DatasetId, tuple[Scope, str]] = {}
        self.runner = JobRunner(
            "audit",
            self._run,
            config.audit.max_concurrent,
            on_change=lambda queued, _: metrics.audit_queue_depth.set(queued),
        )

    def request(self, dataset_id: DatasetId, scope: Scope, trigger: str) -> None:
        current = self._pending.get(dataset_id)
        if current is None or (current[0] == "integrity" and scope == "full"):
            self._pending[dataset_id] = (scope, trigger)
        self.runner.run_now(dataset_id)

    async def schedule_all(self) -> None:
        """Arm the full-audit timer of every dataset, from when it was last fully audited."""
        interval = self.config.audit.interval
        if interval <= 0:
            return
        last = await self.table.last_full()
        now = datetime.now(UTC)
        for record in await self.workspace.list_datasets():
            previous = last.get(record.id)
            due = (
                previous + timedelta(seconds=interval)
                if previous
                else now + timedelta(seconds=interval)
            )
            self.runner.schedule_at(
                record.id, max(due, now + timedelta(seconds=random.uniform(0, 60)))
            )

    def _schedule_next_full(self, dataset_id: DatasetId) -> None:
        interval = self.config.audit.interval
        if interval > 0:
            jitter = 1 + random.uniform(-self.config.sync.jitter, self.config.sync.jitter)
            self.runner.schedule_at(
                dataset_id, datetime.now(UTC) + timedelta(seconds=interval * jitter)
            )

    async def _run(self, key: Hashable) -> None:
        assert isinstance(key, DatasetId)
        scope, trigger = self._pending.pop(key, ("full", "schedule"))
        record = await self.workspace.catalog.get_dataset(key)
        if record is None:
            return  # deleted since it was requested
        started = datetime.now(UTC)
        async with (
            self._spark_gate if needs_engine(record, scope) else nullcontext(),
            cancellable_engine_work(f"audit-{record.alias}"),
        ):
            audit = await audit_dataset(
                self._current(),
                record,
                scope,
                trigger,
                jobs=self.config.audit.jobs,
                started=started,
            )
        crash_point("audit.verified")
        # Whoever sees the record in the table (status, console) must also see it withheld.
        self._on_verdict(audit)
        audit_id = await self.table.add(audit, keep=self.config.audit.keep_reports)
        self.metrics.audits.labels(scope, audit.status).inc()
        level = logging.WARNING if audit.failing else logging.INFO
        log.log(
            level,
            "audit finished",
            extra={
                "dataset": record.alias,
                "scope": scope,
                "trigger": trigger,
                "status": audit.status,
                "summary": audit.summary,
                "audit_id": audit_id,
            },
        )
        await self._on_result(audit)
        if scope == "full":
            self._schedule_next_full(key)
