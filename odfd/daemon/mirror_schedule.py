"""Mirror bookkeeping of the daemon: one timer per active mirror, each sync attempt recorded.

Timers start from the times stored in the catalog (so a restart resumes every schedule), at most
``[sync] max_concurrent`` syncs run at once and at most ``[sync] max_per_peer`` from one peer
(due mirrors of different peers take turns), an attempt is bounded by ``[sync] attempt_timeout``,
and its record sets the mirror's next run (interval or exponential backoff, jittered), the
metrics, and the ``Synced`` condition of the mirror's resource. What happens to a dataset that
moved is the daemon's business: it hears of it through ``on_moved``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Hashable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import aiohttp

from odfd.app.mirror_conditions import record_audited, record_synced
from odfd.app.mirror_sync import MirrorSyncer, SyncReport
from odfd.app.mirrors import mirror_peer, release_mirror_pin
from odfd.config import NodeConfig
from odfd.daemon.jobs import JobRunner
from odfd.daemon.metrics import DaemonMetrics
from odfd.daemon.time import backoff_delay, jittered
from protocol.identity import DatasetId, Multihash
from storage.catalog.audit_records import AuditRecord
from storage.catalog.mirror_records import MirrorRecord, Outcome, SyncAttempt
from storage.catalog.mirrors import AttemptBookkeeping, MirrorTable

if TYPE_CHECKING:
    from odfd.app.node import Node

log = logging.getLogger("odfd.daemon")

MovedListener = Callable[[DatasetId], Awaitable[None]]


class MirrorSchedule:
    """The sync timers and attempt records of every mirror of the daemon's node (``current``:
    the node a reload swapped in, whose workspace stays the same; its configuration and
    transport settings apply from the next attempt). ``session`` is set once the daemon has
    started.
    """

    def __init__(
        self, current: Callable[[], Node], metrics: DaemonMetrics, on_moved: MovedListener
    ) -> None:
        self._current = current
        self.workspace = current().workspace
        self.metrics = metrics
        self.table = MirrorTable(self.workspace.catalog)
        self.session: aiohttp.ClientSession | None = None
        self._on_moved = on_moved
        self._peers: dict[str, str] = {}
        """Mirror name -> the peer it syncs from (what ``max_per_peer`` counts by)."""
        self.runner = JobRunner(
            "sync",
            self._sync_job,
            self.config.sync.max_concurrent,
            on_change=self._queue_changed,
            group_of=self._peer_of,
            group_limit=self.config.sync.max_per_peer,
        )

    @property
    def config(self) -> NodeConfig:
        """The configuration of the node now."""
        return self._current().config

    async def load(self, *, startup: bool = False) -> int:
        """Arm a timer for every active mirror (from the time stored in the catalog), drop
        the timers of removed or paused ones. Returns how many mirrors there are."""
        records = await self.table.list()
        now = datetime.now(UTC)
        active = set()
        self._peers = {record.name: mirror_peer(record.source) for record in records}
        for record in records:
            if record.paused:
                self.runner.cancel(record.name)
                continue
            active.add(record.name)
            if self.runner.is_busy(record.name):
                continue
            due = record.next_run_at or now
            if due <= now:
                spread = self.config.sync.startup_spread if startup else 0.0
                due = now + timedelta(seconds=random.uniform(0, spread))
            current = self.runner.due_at(record.name)
            if current is None or current > due or not startup:
                self.runner.schedule_at(record.name, due if current is None else min(current, due))
        for key in self.runner.scheduled():
            if key not in active:
                self.runner.cancel(key)
        self.metrics.mirrors.labels("active").set(len(active))
        self.metrics.mirrors.labels("paused").set(len(records) - len(active))
        return len(records)

    async def changed(self, name: str) -> None:
        """A controller added, changed, paused or removed the mirror ``name``."""
        record = await self.table.get(name)
        if record is not None:
            self._peers[name] = mirror_peer(record.source)
        if record is None or record.paused:
            self.runner.cancel(name)
        elif not self.runner.is_busy(name):
            self.runner.run_now(name)

    async def audit_finished(self, audit: AuditRecord) -> None:
        """The ``Audited`` condition of the resource of the mirror that brought the dataset."""
        await record_audited(self.workspace, audit)

    def _peer_of(self, key: Hashable) -> str:
        return self._peers.get(str(key), "")

    def _queue_changed(self, queued: int, running: int) -> None:
        self.metrics.queue_depth.set(queued)
        self.metrics.in_flight.set(running)

    async def _sync_job(self, key: Hashable) -> None:
        name = str(key)
        mirror = await self.table.get(name)
        if mirror is None:
            # Renamed with its dataset (or removed) by another process: its row, with its
            # stored next run, is armed under the name it has now.
            await self.load()
            return
        if mirror.paused:
            return
        if self.session is None:
            raise RuntimeError("MirrorSchedule.session is set when the daemon starts")
        syncer = MirrorSyncer(self._current(), self.session)
        started = datetime.now(UTC)
        _, head_before = await syncer.local_head(mirror.name)
        try:
            async with asyncio.timeout(self.config.sync.attempt_timeout):
                report = await syncer.sync(mirror)
        except TimeoutError:
            # The pull may have moved the head before time ran out; the next sync would find
            # nothing new, so derivatives and audits must hear of it from this attempt.
            dataset_id, head_after = await syncer.local_head(mirror.name)
            report = failed_report(
                mirror,
                started,
                "failed",
                f"timed out after {self.config.sync.attempt_timeout:g} s ([sync] attempt_timeout)",
                dataset_id=dataset_id,
                old_head=head_before,
                new_head=head_after,
            )
        except asyncio.CancelledError:
            # Shutdown: the pull was abandoned before or after its head move, never during it.
            report = failed_report(mirror, started, "cancelled", "cancelled at shutdown")
            await asyncio.shield(self._record(mirror, report, next_run=datetime.now(UTC)))
            raise
        await self._record(mirror, report)
        await self._release_pin_if_removed(mirror, report)
        if report.head_changed and report.attempt.dataset_id is not None:
            await self._on_moved(report.attempt.dataset_id)

    async def _release_pin_if_removed(self, mirror: MirrorRecord, report: SyncReport) -> None:
        """A mirror removed while its sync ran: whoever removed it released the pin it knew of,
        not the one this attempt made."""
        cid = report.pinned_cid
        if cid is None or cid == mirror.pinned_cid or await self.table.get(mirror.name) is not None:
            return
        stays = await release_mirror_pin(self.config.ipfs, cid)
        if stays is not None:
            log.warning(
                "pin of a removed mirror left in place",
                extra={"mirror": mirror.name, "error": stays},
            )
        else:
            log.info("pin of a removed mirror released", extra={"mirror": mirror.name, "cid": cid})

    async def _record(
        self, mirror: MirrorRecord, report: SyncReport, next_run: datetime | None = None
    ) -> None:
        attempt = report.attempt
        sync = self.config.sync
        failures = mirror.consecutive_failures + 1 if attempt.outcome == "failed" else 0
        if next_run is None:
            if failures:
                delay = backoff_delay(failures, sync.backoff_initial, sync.backoff_max)
            else:
                delay = mirror.interval
            next_run = attempt.finished_at + jittered(delay, sync.jitter)
        source = report.source
        book = AttemptBookkeeping(
            next_run_at=next_run,
            consecutive_failures=failures,
            last_error=attempt.error,
            source_head=source.head if source else mirror.source_head,
            source_sequence=source.sequence_number if source else mirror.source_sequence,
            source_cid=source.cid if source else mirror.source_cid,
            pinned_cid=report.pinned_cid,
            target_state=report.target_state,
        )
        await self.table.finish_attempt(attempt, book)
        self._count(attempt)
        level = logging.WARNING if attempt.outcome in ("failed", "cancelled") else logging.INFO
        log.log(
            level,
            "sync finished",
            extra={
                "mirror": mirror.name,
                "outcome": attempt.outcome,
                "blocks": attempt.blocks,
                "bytes": attempt.bytes,
                "seconds": round(attempt.duration, 3),
                "head": str(attempt.new_head) if attempt.new_head else None,
                "next_run": next_run.isoformat(timespec="seconds"),
                **({"error": attempt.error} if attempt.error else {}),
            },
        )
        if attempt.outcome != "cancelled":
            self.runner.schedule_at(mirror.name, next_run)
        if mirror.resource_id is not None:
            await record_synced(self.workspace, mirror.resource_id, attempt, book.source_head)

    def _count(self, attempt: SyncAttempt) -> None:
        self.metrics.syncs.labels(attempt.outcome).inc()
        self.metrics.sync_duration.observe(attempt.duration)
        self.metrics.sync_blocks.inc(attempt.blocks)
        self.metrics.sync_objects.inc(attempt.objects)
        self.metrics.sync_bytes.inc(attempt.bytes)
        for push in attempt.pushes:
            if not push.get("skipped"):
                self.metrics.pushes.labels("failed" if push.get("error") else "ok").inc()
        if attempt.outcome == "failed":
            self.metrics.sync_failures.inc()


def failed_report(
    mirror: MirrorRecord,
    started: datetime,
    outcome: Outcome,
    error: str,
    *,
    dataset_id: DatasetId | None = None,
    old_head: Multihash | None = None,
    new_head: Multihash | None = None,
) -> SyncReport:
    """The report of an attempt that ended without the syncer's own report (timeout, shutdown)."""
    attempt = SyncAttempt(
        mirror=mirror.name,
        source=mirror.source,
        dataset_id=dataset_id,
        started_at=started,
        finished_at=datetime.now(UTC),
        outcome=outcome,
        old_head=old_head,
        new_head=new_head,
        error=error,
    )
    moved = new_head is not None and new_head != old_head
    return SyncReport(attempt, None, mirror.pinned_cid, mirror.target_state, moved)
