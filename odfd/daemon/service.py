"""The daemon: every service of a node in one asyncio process.

- the HTTP/WebSocket server of ``odfd.server`` (plus ``/metrics``);
- the sync scheduler: one timer per mirror (``JobRunner``), at most ``[sync] max_concurrent``
  syncs at once, jittered intervals, exponential backoff on failure, every attempt recorded;
- local derivative datasets transformed when their inputs change, and caught up at start-up and
  hourly when an input moved without telling them (``DerivativeUpdater``);
- audits after syncs and on a schedule (``Auditor``), failing datasets optionally withheld;
- resource controllers (``Reconciler``), run after ``apply`` and every ``reconcile_interval``;
- the admin API on a Unix socket.

Blocking work goes to one bounded thread pool (the loop's default executor, so every
``asyncio.to_thread`` below us uses it too); Spark work shares one session and is limited by
``[daemon] spark_jobs`` (shutdown stops the session unless it ran before the daemon started: a
process embedding the daemon keeps its own). ``SIGTERM``/``SIGINT`` stop scheduling, let running
work finish for ``shutdown_timeout`` seconds and cancel the rest (a cancelled pull leaves its
dataset at the old or the new head: heads move last, by compare-and-swap); ``SIGHUP`` reloads the
configuration and the mirror list. A restart resumes every schedule from the catalog.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import random
import signal
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from odfd.config import NodeConfig, load_config
from odfd.daemon.admin import json_handler, socket_path
from odfd.daemon.audits import Auditor
from odfd.daemon.controllers import Reconciler
from odfd.daemon.derivatives import DerivativeUpdater
from odfd.daemon.heartbeat import resign_owned
from odfd.daemon.jobs import JobRunner
from odfd.daemon.logs import configure_logging
from odfd.daemon.metrics import CONTENT_TYPE, DaemonMetrics
from odfd.daemon.mirror_sync import MirrorSyncer, PinReleaseError, SyncReport, release_pin
from odfd.daemon.recovery import recover_workspace
from odfd.daemon.resources import AUDITED, SYNCED, kind_of
from odfd.daemon.status import build_status
from odfd.daemon.time import backoff_delay, jittered
from odfd.server.app import create_app
from odfd.server.state import STATE_KEY
from protocol.errors import OdfError
from protocol.identity import DatasetId, DatasetRef, Multihash
from storage.catalog.audits import AuditRecord
from storage.catalog.mirrors import AttemptBookkeeping, MirrorRecord, MirrorTable, SyncAttempt
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace
from verifier.engine import session as spark_session

log = logging.getLogger("odfd.daemon")

STATE_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"
_HOUSEKEEPING = "housekeeping"
_RECONCILE = "reconcile"
_RESIGN = "resign"


class DaemonError(OdfError):
    """The daemon cannot start (another one runs on the workspace, the port is taken, ...)."""


class Daemon:
    def __init__(
        self,
        workspace: Workspace,
        config: NodeConfig,
        *,
        server_overrides: dict[str, Any] | None = None,
    ) -> None:
        """``server_overrides`` (command-line ``address`` / ``port``) win over the file, also on reload."""
        self.workspace = workspace
        self._server_overrides = server_overrides or {}
        config = replace(config, server=replace(config.server, **self._server_overrides))
        self.config = config
        self.metrics = DaemonMetrics()
        self.mirrors = MirrorTable(workspace.catalog)
        self.started_at = datetime.now(UTC)
        self.server_url: str | None = None
        self.admin_path = socket_path(workspace.layout, config.daemon.admin_socket)
        self.withheld: set[DatasetId] = set()
        self._spark_gate = asyncio.Semaphore(config.daemon.spark_jobs)
        self._stopping = asyncio.Event()
        self._runners: list[web.AppRunner] = []
        self._lock_fd: int | None = None
        self._session: aiohttp.ClientSession | None = None
        self._owns_spark = False
        self._executor = ThreadPoolExecutor(
            config.daemon.blocking_threads, thread_name_prefix="odfd-blocking"
        )
        self.syncs = JobRunner(
            "sync", self._sync_job, config.sync.max_concurrent, on_change=self._sync_queue_changed
        )
        self.auditor = Auditor(
            workspace, config, self.metrics, self._spark_gate, self._audit_finished
        )
        self.derivatives = DerivativeUpdater(
            workspace, self.metrics, self._spark_gate, self._transformed
        )
        self.reconciler = Reconciler(workspace, config.sync, self)
        self.chores = JobRunner("chores", self._chore, 1)

    # --- life cycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Start everything, serve until ``stop()`` (or a signal), then shut down in order."""
        await self.start()
        try:
            await self._stopping.wait()
        finally:
            await self.shutdown()

    async def start(self) -> None:
        self._take_lock()
        loop = asyncio.get_running_loop()
        loop.set_default_executor(self._executor)
        spark_session.configure(self.config.spark)
        self._owns_spark = not spark_session.is_running()
        for message in await recover_workspace(self.workspace):
            log.info("recovery", extra={"fix": message})
        self._session = aiohttp.ClientSession()
        await self._start_server()
        await self._start_admin()
        for runner in (self.syncs, self.auditor.runner, self.derivatives.runner, self.chores):
            runner.start()
        await self._load_withheld()
        await self.load_mirrors(startup=True)
        await self.auditor.schedule_all()
        await self._audit_unaudited_heads()
        self.chores.run_now(_RECONCILE)
        self.chores.run_now(_RESIGN)  # also signs heads a crash left unsigned
        self.chores.run_now(
            _HOUSEKEEPING
        )  # also catches up derivatives left behind by the last run
        self._install_signals()
        self._write_state_file()
        await self._refresh_gauges()
        log.info(
            "daemon started",
            extra={
                "workspace": str(self.workspace.root),
                "server": self.server_url,
                "admin": str(self.admin_path),
                "pid": os.getpid(),
            },
        )

    def stop(self) -> None:
        self._stopping.set()

    async def shutdown(self) -> None:
        grace = self.config.daemon.shutdown_timeout
        log.info(
            "daemon stopping", extra={"grace_seconds": grace, "syncs_running": self.syncs.running}
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        deadline = loop.time() + grace
        for runner in (self.chores, self.syncs, self.derivatives.runner, self.auditor.runner):
            cancelled = await runner.close(max(deadline - loop.time(), 0.0))
            if cancelled:
                log.warning(
                    "work cancelled at shutdown",
                    extra={"runner": runner.name, "keys": ", ".join(map(str, cancelled))},
                )
        for app_runner in reversed(self._runners):
            await app_runner.cleanup()
        if self._session is not None:
            await self._session.close()
        self._state_path.unlink(missing_ok=True)
        self.admin_path.unlink(missing_ok=True)
        if self._owns_spark:
            await asyncio.to_thread(spark_session.stop)
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        log.info("daemon stopped")

    def _take_lock(self) -> None:
        fd = os.open(self.workspace.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DaemonError(f"another odfd daemon is running on {self.workspace.root}") from None
        self._lock_fd = fd

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stop)
        loop.add_signal_handler(signal.SIGINT, self.stop)
        loop.add_signal_handler(
            signal.SIGHUP, lambda: asyncio.ensure_future(self._reload_on_signal())
        )

    @property
    def _state_path(self) -> Path:
        return self.workspace.root / STATE_FILE

    def _write_state_file(self) -> None:
        """Where to find this daemon (for people and scripts; the CLI uses the socket)."""
        state = {
            "pid": os.getpid(),
            "startedAt": self.started_at.isoformat(),
            "serverUrl": self.server_url,
            "adminSocket": str(self.admin_path),
        }
        self._state_path.write_text(json.dumps(state, indent=2) + "\n")

    async def _start_server(self) -> None:
        app = create_app(self.workspace, self.config.server)
        app[STATE_KEY].withheld = self.withheld
        if self.config.metrics.enabled:
            app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        site = web.TCPSite(runner, self.config.server.address, self.config.server.port)
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise DaemonError(
                f"cannot listen on {self.config.server.address}:{self.config.server.port} "
                f"([server] address/port): {err.strerror}"
            ) from None
        self._runners.append(runner)
        port = runner.addresses[0][1] if runner.addresses else self.config.server.port
        host = (
            f"[{self.config.server.address}]"
            if ":" in self.config.server.address
            else self.config.server.address
        )
        self.server_url = f"http://{host}:{port}/"

    async def _start_admin(self) -> None:
        app = web.Application()
        routes = [
            ("GET", "/ping", json_handler(self._ping)),
            ("GET", "/status", json_handler(self._status)),
            ("GET", "/metrics", self._metrics),
            ("POST", "/reload", json_handler(self._reload)),
            ("POST", "/reconcile", json_handler(self._reconcile)),
            ("POST", "/mirrors/{name}/sync", json_handler(self._sync_now)),
            ("POST", "/audit/{dataset}", json_handler(self._audit_now)),
            ("POST", "/stop", json_handler(self._stop_request)),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self.admin_path.parent.mkdir(parents=True, exist_ok=True)
        self.admin_path.unlink(missing_ok=True)  # left by a killed daemon (the lock says none runs)
        old_mask = os.umask(0o177)
        try:
            await web.UnixSite(runner, str(self.admin_path)).start()
        finally:
            os.umask(old_mask)
        os.chmod(self.admin_path, 0o600)
        self._runners.append(runner)

    # --- configuration --------------------------------------------------------------------------

    async def reload(self) -> dict[str, Any]:
        """Re-read ``config.toml`` (settings that need a restart are reported, not applied) and
        the mirror list."""
        try:
            new = load_config(self.workspace.layout.config_path)
            new = replace(new, server=replace(new.server, **self._server_overrides))
        except OdfError as err:
            log.error(
                "reload refused: the configuration is invalid; keeping the current one",
                extra={"error": str(err)},
            )
            raise
        needs_restart = [
            name
            for name in ("server", "spark", "daemon")
            if getattr(new, name) != getattr(self.config, name)
            and not (name == "server" and _same_server(new, self.config))
        ]
        if new.sync.max_concurrent != self.config.sync.max_concurrent:
            needs_restart.append("sync.max_concurrent")
        if new.audit.max_concurrent != self.config.audit.max_concurrent:
            needs_restart.append("audit.max_concurrent")
        self.config = new
        self.auditor.config = new
        self.reconciler.sync = new.sync
        configure_logging(new.log)
        if not new.audit.withhold_failing:
            self.withheld.clear()
        else:
            await self._load_withheld()
        count = await self.load_mirrors()
        await self.auditor.schedule_all()
        if needs_restart:
            log.warning(
                "reloaded; these settings take effect after a restart",
                extra={"settings": ", ".join(needs_restart)},
            )
        log.info("configuration reloaded", extra={"mirrors": count})
        return {"mirrors": count, "needsRestart": needs_restart}

    async def _reload_on_signal(self) -> None:
        try:
            await self.reload()
        except OdfError:
            pass  # logged by reload(); the daemon runs on with its current configuration

    async def load_mirrors(self, *, startup: bool = False) -> int:
        """Arm a timer for every active mirror (from the time stored in the catalog), drop
        the timers of removed or paused ones."""
        records = await self.mirrors.list()
        now = datetime.now(UTC)
        active = set()
        for record in records:
            if record.paused:
                self.syncs.cancel(record.name)
                continue
            active.add(record.name)
            if self.syncs.is_busy(record.name):
                continue
            due = record.next_run_at or now
            if due <= now:
                spread = self.config.sync.startup_spread if startup else 0.0
                due = now + timedelta(seconds=random.uniform(0, spread))
            current = self.syncs.due_at(record.name)
            if current is None or current > due or not startup:
                self.syncs.schedule_at(record.name, due if current is None else min(current, due))
        for key in self.syncs.scheduled():
            if key not in active:
                self.syncs.cancel(key)
        self.metrics.mirrors.labels("active").set(len(active))
        self.metrics.mirrors.labels("paused").set(len(records) - len(active))
        return len(records)

    # --- mirrors --------------------------------------------------------------------------------

    def _sync_queue_changed(self, queued: int, running: int) -> None:
        self.metrics.queue_depth.set(queued)
        self.metrics.in_flight.set(running)

    async def _sync_job(self, key: Hashable) -> None:
        name = str(key)
        mirror = await self.mirrors.get(name)
        if mirror is None or mirror.paused:
            return
        assert self._session is not None  # started
        syncer = MirrorSyncer(self.workspace, self.config, self._session)
        started = datetime.now(UTC)
        _, head_before = await syncer.local_head(mirror.name)
        try:
            async with asyncio.timeout(self.config.sync.attempt_timeout):
                report = await syncer.sync(mirror)
        except TimeoutError:
            # The pull may have moved the head before time ran out; the next sync would find
            # nothing new, so derivatives and audits must hear of it from this attempt.
            dataset_id, head_after = await syncer.local_head(mirror.name)
            report = _failed_report(
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
            report = _failed_report(mirror, started, "cancelled", "cancelled at shutdown")
            await asyncio.shield(self._record(mirror, report, next_run=datetime.now(UTC)))
            raise
        await self._record(mirror, report)
        await self._release_pin_if_removed(mirror, report)
        if report.head_changed and report.attempt.dataset_id is not None:
            await self._dataset_moved(report.attempt.dataset_id, "sync")
            self.chores.run_now(_RECONCILE)  # resources may have waited for this dataset

    async def _release_pin_if_removed(self, mirror: MirrorRecord, report: SyncReport) -> None:
        """A mirror removed while its sync ran: whoever removed it released the pin it knew of,
        not the one this attempt made."""
        cid = report.pinned_cid
        if (
            cid is None
            or cid == mirror.pinned_cid
            or await self.mirrors.get(mirror.name) is not None
        ):
            return
        try:
            await release_pin(self.config.ipfs, cid)
        except PinReleaseError as err:
            log.warning(
                "pin of a removed mirror left in place",
                extra={"mirror": mirror.name, "error": str(err)},
            )
        else:
            log.info("pin of a removed mirror released", extra={"mirror": mirror.name, "cid": cid})

    async def _record(
        self, mirror: MirrorRecord, report: SyncReport, next_run: datetime | None = None
    ) -> None:
        attempt = report.attempt
        failures = mirror.consecutive_failures + 1 if attempt.outcome == "failed" else 0
        if next_run is None:
            if failures:
                delay = backoff_delay(
                    failures, self.config.sync.backoff_initial, self.config.sync.backoff_max
                )
            else:
                delay = mirror.interval
            next_run = attempt.finished_at + jittered(delay, self.config.sync.jitter)
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
        await self.mirrors.finish_attempt(attempt, book)
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
            self.syncs.schedule_at(mirror.name, next_run)
        if mirror.resource_id is not None:
            await self._set_condition(
                mirror.resource_id,
                SYNCED,
                {
                    "status": "False" if attempt.outcome in ("failed", "cancelled") else "True",
                    "outcome": attempt.outcome,
                    "message": attempt.error,
                    "head": None if attempt.new_head is None else attempt.new_head.to_multibase(),
                    "sourceHead": None
                    if book.source_head is None
                    else book.source_head.to_multibase(),
                    "at": attempt.finished_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
                },
            )

    async def _set_condition(self, resource_id: str, key: str, value: dict[str, Any]) -> None:
        await ResourceTable(self.workspace.catalog).update_status(
            resource_id, conditions={key: value}
        )

    # --- datasets that moved: transforms and audits -----------------------------------------------

    async def _dataset_moved(self, dataset_id: DatasetId, trigger: str) -> None:
        if self.config.audit.after_sync:
            self.auditor.request(dataset_id, "integrity", trigger)
        if self.config.sync.transform_derivatives:
            await self.derivatives.inputs_changed(dataset_id)
        if self.auditor.runner.due_at(dataset_id) is None and self.config.audit.interval > 0:
            self.auditor.runner.schedule_at(
                dataset_id,
                datetime.now(UTC) + jittered(self.config.audit.interval, self.config.sync.jitter),
            )

    async def _transformed(self, dataset_id: DatasetId) -> None:
        if self.config.audit.after_sync:
            self.auditor.request(dataset_id, "integrity", "transform")

    async def _audit_finished(self, audit: AuditRecord) -> None:
        if self.config.audit.withhold_failing:
            if audit.failing:
                self.withheld.add(audit.dataset_id)
            else:
                self.withheld.discard(audit.dataset_id)
        await self._refresh_gauges()
        mirror = await self.mirrors.get(audit.alias)
        if mirror is not None and mirror.resource_id is not None:
            await self._set_condition(
                mirror.resource_id,
                AUDITED,
                {
                    "status": "False" if audit.failing else "True",
                    "scope": audit.scope,
                    "result": audit.status,
                    "message": audit.summary,
                    "at": audit.finished_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
                },
            )

    async def _audit_unaudited_heads(self) -> None:
        """A head that moved just before a shutdown or a crash (a sync cancelled after its head
        move, a kill before the audit ran) never had its after-sync audit: run it now."""
        if not self.config.audit.after_sync:
            return
        latest = await self.auditor.table.latest_all()
        for record in await self.workspace.list_datasets():
            audit = latest.get(record.id)
            if record.head is not None and (audit is None or audit.head != record.head):
                self.auditor.request(record.id, "integrity", "startup")

    async def _load_withheld(self) -> None:
        if not self.config.audit.withhold_failing:
            return
        latest = await self.auditor.table.latest_all()
        self.withheld.clear()
        self.withheld.update(dataset_id for dataset_id, audit in latest.items() if audit.failing)

    async def _refresh_gauges(self) -> None:
        self.metrics.datasets.set(len(await self.workspace.list_datasets()))
        latest = await self.auditor.table.latest_all()
        self.metrics.datasets_failing.set(sum(1 for audit in latest.values() if audit.failing))

    # --- controller hooks ------------------------------------------------------------------------

    async def mirror_changed(self, name: str) -> None:
        record = await self.mirrors.get(name)
        if record is None or record.paused:
            self.syncs.cancel(name)
        elif not self.syncs.is_busy(name):
            self.syncs.run_now(name)

    async def dataset_changed(self, dataset_id: DatasetId) -> None:
        """A controller created or changed a dataset: a derivative gets its (next) transform."""
        self.derivatives.request(dataset_id)
        await self._refresh_gauges()

    # --- chores: reconcile, housekeeping -----------------------------------------------------------

    async def _chore(self, key: Hashable) -> None:
        now = datetime.now(UTC)
        if key == _RECONCILE:
            await self._reconcile_resources()
            self.chores.schedule_at(
                _RECONCILE, now + timedelta(seconds=self.config.daemon.reconcile_interval)
            )
        elif key == _RESIGN:
            if self.config.daemon.resign_interval > 0:
                self.chores.schedule_at(
                    _RESIGN, now + timedelta(seconds=self.config.daemon.resign_interval)
                )
            signed = await resign_owned(self.workspace)
            if signed:
                log.info("own heads re-signed", extra={"datasets": signed})
        elif key == _HOUSEKEEPING:
            self.chores.schedule_at(
                _HOUSEKEEPING, now + timedelta(hours=1)
            )  # first: a failure here must not end it
            pruned = await self.mirrors.prune_attempts(
                now - timedelta(seconds=self.config.sync.history)
            )
            if pruned:
                log.info("old sync attempts pruned", extra={"rows": pruned})
            if self.config.sync.transform_derivatives:
                await self.derivatives.catch_up()
            await self._refresh_gauges()

    async def _reconcile_resources(self) -> list[dict[str, Any]]:
        results = await self.reconciler.reconcile_all()
        phases: dict[tuple[str, str], int] = {}
        for result in results:
            key = (kind_of(result.resource.schema), result.phase)
            phases[key] = phases.get(key, 0) + 1
        self.metrics.resources.clear()
        for (kind, phase), count in phases.items():
            self.metrics.resources.labels(kind, phase).set(count)
        return [
            {
                "kind": kind_of(r.resource.schema),
                "name": r.resource.name,
                "phase": r.phase,
                "generation": r.resource.generation,
                "message": r.message,
            }
            for r in results
        ]

    # --- admin API --------------------------------------------------------------------------------

    async def _ping(self, request: web.Request) -> dict[str, Any]:
        return {"pid": os.getpid()}

    def runtime(self) -> dict[str, Any]:
        return {
            "running": True,
            "pid": os.getpid(),
            "startedAt": self.started_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "serverUrl": self.server_url,
            "adminSocket": str(self.admin_path),
            "syncsRunning": self.syncs.running,
            "syncsQueued": self.syncs.queued,
            "syncTimers": self.syncs.timers,
            "auditsQueued": self.auditor.runner.queued,
            "auditsRunning": self.auditor.runner.running,
            "transformsQueued": self.derivatives.runner.queued,
        }

    async def _status(self, request: web.Request) -> dict[str, Any]:
        next_runs = {str(k): v for k, v in self.syncs.scheduled().items()}
        return await build_status(
            self.workspace, self.runtime(), next_runs, {str(d) for d in self.withheld}
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics.queue_depth.set(self.syncs.queued)
        return web.Response(body=self.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    async def _reload(self, request: web.Request) -> dict[str, Any]:
        return await self.reload()

    async def _reconcile(self, request: web.Request) -> dict[str, Any]:
        return {"resources": await self._reconcile_resources()}

    async def _sync_now(self, request: web.Request) -> dict[str, Any]:
        mirror = await self.mirrors.require(request.match_info["name"])
        self.syncs.run_now(mirror.name)
        return {"queued": mirror.name}

    async def _audit_now(self, request: web.Request) -> dict[str, Any]:
        record = await self.workspace.resolve(DatasetRef.parse(request.match_info["dataset"]))
        scope = request.query.get("scope", "full")
        if scope not in ("full", "integrity"):
            raise DaemonError(f"scope must be full or integrity, not {scope!r}")
        self.auditor.request(record.id, scope, "manual")  # type: ignore[arg-type]
        return {"queued": record.alias, "scope": scope}

    async def _stop_request(self, request: web.Request) -> dict[str, Any]:
        asyncio.get_running_loop().call_later(0.1, self.stop)
        return {"stopping": True}


def _same_server(a: NodeConfig, b: NodeConfig) -> bool:
    """Equal but for the signing key, which is random per start unless configured."""
    return replace(a.server, url_signing_key=b"") == replace(b.server, url_signing_key=b"")


def _failed_report(
    mirror: MirrorRecord,
    started: datetime,
    outcome: str,
    error: str,
    *,
    dataset_id: DatasetId | None = None,
    old_head: Multihash | None = None,
    new_head: Multihash | None = None,
) -> SyncReport:
    attempt = SyncAttempt(
        mirror=mirror.name,
        source=mirror.source,
        dataset_id=dataset_id,
        started_at=started,
        finished_at=datetime.now(UTC),
        outcome=outcome,
        old_head=old_head,  # type: ignore[arg-type]
        new_head=new_head,
        error=error,
    )
    moved = new_head is not None and new_head != old_head
    return SyncReport(attempt, None, mirror.pinned_cid, mirror.target_state, moved)  # type: ignore[arg-type]


async def run_daemon(
    root: Path | None, *, port: int | None = None, address: str | None = None
) -> None:
    """``odfd daemon``: open the workspace, check the configuration, run until stopped."""
    async with await Workspace.open(root) as workspace:
        config = load_config(workspace.layout.config_path)
        overrides = {
            key: value for key, value in (("address", address), ("port", port)) if value is not None
        }
        configure_logging(config.log)
        daemon = Daemon(workspace, config, server_overrides=overrides)
        await daemon.run()
