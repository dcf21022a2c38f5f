"""The daemon: every service of a node in one asyncio process.

- the HTTP/WebSocket server of ``odfd.server`` (plus ``/metrics``);
- the sync scheduler: one timer per mirror (``JobRunner``), at most ``[sync] max_concurrent``
  syncs at once, jittered intervals, exponential backoff on failure, every attempt recorded;
- local derivative datasets transformed when their inputs change, and caught up at start-up and
  hourly when an input moved without telling them (``DerivativeUpdater``);
- audits after syncs and on a schedule (``Auditor``), failing datasets optionally withheld;
- resource controllers (``Reconciler``), run after ``apply`` and every ``reconcile_interval``;
- the admin API on a Unix socket;
- a local Spark Connect server for its Spark work and for CLI commands on the workspace
  (``odfd.app.warm_engine.EngineServer``; ``[daemon] spark_connect``), unless ``[spark] remote``
  names one.

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
import gc
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

# The query engine (through the application layer's plans of it), loaded with the daemon's other
# modules before its event loop runs: loaded later (the query API's warm-up loads it in a worker
# thread), its extension's load holds the GIL for tens of milliseconds (hundreds on a loaded
# machine) that the loop would wait through.
import odfd.app.live_plan  # noqa: F401
from odfd.app.controllers import Reconciler
from odfd.app.node import Node
from odfd.app.node_flows import flow_runner
from odfd.app.owner_heartbeat import resign_owned
from odfd.app.recovery import recover_workspace
from odfd.app.resource_service import reconciling_with
from odfd.app.resources import kind_of
from odfd.app.uploads import uploads_of
from odfd.app.warm_engine import EngineServer
from odfd.config import NodeConfig, ServerConfig
from odfd.console.api import console_mount
from odfd.daemon.admin import AdminApi
from odfd.daemon.admin_client import socket_path
from odfd.daemon.audits import Auditor
from odfd.daemon.commands import CommandRunner
from odfd.daemon.console_backend import DaemonBackend
from odfd.daemon.derivatives import DerivativeUpdater
from odfd.daemon.jobs import JobRunner
from odfd.daemon.logs import configure_logging
from odfd.daemon.loop_lag import watch_loop_lag
from odfd.daemon.metrics import DaemonMetrics
from odfd.daemon.mirror_schedule import MirrorSchedule
from odfd.daemon.mirror_webhooks import MirrorWebhooks
from odfd.daemon.time import jittered
from odfd.errors import OdfdError
from odfd.flows.spec import DATASET_REF_UPDATED
from odfd.server.app import Mount, create_app
from odfd.server.ingest_api import IngestApi
from odfd.server.query_api import query_api_mount
from odfd.server.resource_api import ResourceApi
from odfd.server.source_api import SourceApi
from odfd.server.state import STATE_KEY
from odfd.server.upload_api import UploadApi
from odfd.sources.buffers import SourceBuffers
from protocol.errors import OdfError
from protocol.identity import DatasetId
from storage.catalog.audit_records import AuditRecord

if TYPE_CHECKING:
    from odfd.flight_sql.endpoint import FlightSqlEndpoint

log = logging.getLogger("odfd.daemon")

STATE_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"
_HOUSEKEEPING = "housekeeping"
_RECONCILE = "reconcile"
_RECONCILE_UNSETTLED = "reconcile-unsettled"
_RESIGN = "resign"
_FLOWS = "flows"
_FLOW_TICK = timedelta(seconds=15)
"""How often flows are looked at: cron times are minutes, so a run starts within this of its time."""


class DaemonError(OdfdError):
    """The daemon cannot start (another one runs on the workspace, the port is taken, ...)."""


class Daemon:
    def __init__(
        self,
        node: Node,
        *,
        server_overrides: dict[str, Any] | None = None,
        reconfigure: Callable[[], Node] | None = None,
    ) -> None:
        """``server_overrides`` (command-line ``address`` / ``port``) win over the file, also on
        reload; ``reconfigure`` builds the node a reload swaps in (default: ``node.reconfigured``,
        ``config.toml`` read again)."""
        self.node = node
        """The node the daemon and the commands it runs for clients work on."""
        self.workspace = workspace = node.workspace
        self._reconfigure = reconfigure or node.reconfigured
        self._server_overrides = server_overrides or {}
        self.config = config = self._effective(node.config)
        self.metrics = DaemonMetrics()
        self.started_at = datetime.now(UTC)
        self.server_url: str | None = None
        self.admin_path = socket_path(workspace.layout, config.daemon.admin_socket)
        self.withheld: set[DatasetId] = set()
        self._spark_gate = asyncio.Semaphore(config.daemon.spark_jobs)
        self.engines = node.engines
        """The node's engines: Spark on the daemon's own Connect server (``engine_server``), which
        they find recorded in the workspace as the workspace's commands do."""
        self._stopping = asyncio.Event()
        self._runners: list[web.AppRunner] = []
        self._lock_fd: int | None = None
        self._session: aiohttp.ClientSession | None = None
        self._owns_spark = False
        self._background: set[asyncio.Task[None]] = set()
        self._state_written = False
        self._admin_listening = False
        self.engine_server: EngineServer | None = None
        self.flight_sql: FlightSqlEndpoint | None = None
        self._engine_is_remote = False
        self._executor = ThreadPoolExecutor(
            config.daemon.blocking_threads, thread_name_prefix="odfd-blocking"
        )
        self.mirror_schedule = MirrorSchedule(lambda: self.node, self.metrics, self._synced)
        self.syncs = self.mirror_schedule.runner
        self.mirror_webhooks = MirrorWebhooks(
            lambda: self.node,
            lambda: self.config.server.base_url or self.server_url,
            self.syncs.run_now,
        )
        self.mirrors = self.mirror_schedule.table
        self.commands = CommandRunner(lambda: self.node)
        self.admin = AdminApi(self)
        self.auditor = Auditor(
            lambda: self.node,
            config,
            self.metrics,
            self._spark_gate,
            self._audit_finished,
            self._apply_verdict,
        )
        self.derivatives = DerivativeUpdater(
            lambda: self.node, self.metrics, self._spark_gate, self._transformed
        )
        self.reconciler = Reconciler(workspace, config.sync, self)
        self.chores = JobRunner("chores", self._chore, 1)
        self.source_buffers = SourceBuffers()
        self._source_checking = False
        self._source_check_again = False
        self.flows = flow_runner(node, self.source_buffers, moved=self._ingested)

    # --- life cycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Start everything, serve until ``stop()`` (or a signal), then shut down in order.

        As aiohttp's ``run_app``: a start-up that fails half-way is cleaned up like a stop, so it
        leaves no server, client session, socket or lock behind."""
        try:
            await self.start()
            await self._stopping.wait()
        finally:
            await self.shutdown()

    async def start(self) -> None:
        self._take_lock()
        loop = asyncio.get_running_loop()
        loop.set_default_executor(self._executor)
        self._owns_spark = not self.engines.running()
        for message in await recover_workspace(self.workspace):
            log.info("recovery", extra={"fix": message})
        # Per-peer connection cap (aiohttp counts by host, port and TLS), shared by every sync.
        connector = aiohttp.TCPConnector(limit_per_host=self.config.sync.peer_connections)
        self._session = aiohttp.ClientSession(connector=connector)
        self.mirror_schedule.session = self._session
        await self._start_server()
        await self._start_flight_sql()
        await self._start_admin()
        self._admin_listening = True
        try:
            await self._configure_engine()
        except BaseException:
            await self._stop_engine_server()
            raise
        for runner in (self.syncs, self.auditor.runner, self.derivatives.runner, self.chores):
            runner.start()
        await self._load_withheld()
        await self.mirror_schedule.load(startup=True)
        await self.auditor.schedule_all()
        await self._audit_unaudited_heads()
        self.chores.run_now(_RECONCILE)
        self.chores.run_now(_RESIGN)  # also signs heads a crash left unsigned
        self.chores.run_now(_FLOWS)
        self.chores.run_now(
            _HOUSEKEEPING
        )  # also catches up derivatives left behind by the last run
        self._install_signals()
        await asyncio.to_thread(self._write_state_file)
        self._state_written = True
        self.commands.ready = True
        # A daemon thread: a shutdown during the warm-up (its Connect client may be retrying a
        # server being stopped) must not wait for it, as the loop's executor would.
        threading.Thread(
            target=self.commands.warm_up,
            args=(self.engines.start if self._engine_is_remote else None,),
            name="odfd-warm-up",
            daemon=True,
        ).start()
        await self._refresh_gauges()
        self._in_background(watch_loop_lag(self.metrics.loop_lag), "loop-lag")
        # What start-up loaded (modules, 10,000 mirrors' records and timers) lives as long as
        # the daemon: out of the cyclic collector's sight, its full passes stay short and do
        # not stall serving for hundreds of milliseconds.
        gc.freeze()
        log.info(
            "daemon started",
            extra={
                "workspace": str(self.workspace.root),
                "server": self.server_url,
                "flight_sql": self.flight_sql.url if self.flight_sql is not None else None,
                "admin": str(self.admin_path),
                "pid": os.getpid(),
            },
        )

    def stop(self) -> None:
        self._stopping.set()

    async def shutdown(self) -> None:
        """Stop what ``start`` set up, in reverse; safe after a start that failed half-way."""
        if self._lock_fd is None:
            return  # the workspace's lock was never ours: nothing here belongs to this daemon
        grace = self.config.daemon.shutdown_timeout
        log.info(
            "daemon stopping", extra={"grace_seconds": grace, "syncs_running": self.syncs.running}
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        deadline = loop.time() + grace
        if self.flight_sql is not None:
            await self.flight_sql.stop()
            self.flight_sql = None
        await self.commands.close(grace)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for runner in (self.chores, self.syncs, self.derivatives.runner, self.auditor.runner):
            cancelled = await runner.close(max(deadline - loop.time(), 0.0))
            if cancelled:
                log.warning(
                    "work cancelled at shutdown",
                    extra={"runner": runner.name, "keys": ", ".join(map(str, cancelled))},
                )
        for app_runner in reversed(self._runners):
            await app_runner.cleanup()
        self._runners.clear()
        if self._session is not None:
            await self._session.close()
        if self._state_written:
            await asyncio.to_thread(self._state_path.unlink, missing_ok=True)
        if self._admin_listening:
            await asyncio.to_thread(self.admin_path.unlink, missing_ok=True)
        if self._owns_spark and self.engines.running():  # ours (never a host process's)
            await asyncio.to_thread(self.engines.stop)
        await self._stop_engine_server()
        self._executor.shutdown(wait=False, cancel_futures=True)
        gc.unfreeze()
        os.close(self._lock_fd)
        self._lock_fd = None
        log.info("daemon stopped")

    async def _configure_engine(self) -> None:
        """Spark for the daemon's work: a remote server, its own Connect server (recorded in the
        workspace, where its engines find it), or a local JVM."""
        settings = self.config.spark
        if settings.remote is None and self.config.daemon.spark_connect and self._owns_spark:
            self.engine_server = EngineServer(
                self.workspace.root, settings, self.config.daemon.spark_connect_port
            )
            await self.engine_server.start()
        self._engine_is_remote = settings.remote is not None or self.engine_server is not None

    async def _stop_engine_server(self) -> None:
        if self.engine_server is not None:
            await self.engine_server.stop()
            self.engine_server = None

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
        loop.add_signal_handler(signal.SIGHUP, self._reload_in_background)

    def _reload_in_background(self) -> None:
        """SIGHUP: a reload task."""
        self._in_background(self._reload_on_signal(), "reload")

    def _in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """A task referenced until it ends (the loop keeps only weak ones), cancelled at
        shutdown."""
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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
        mounts: list[Mount] = [
            console_mount(DaemonBackend(self)),
            query_api_mount(lambda: self.node),
            IngestApi(lambda: self.node, ingested=self._ingested),
            UploadApi(lambda: self.node),
            ResourceApi(lambda: self.node, reconciling_with(self.reconciler)),
            self.mirror_webhooks,
            SourceApi(lambda: self.node, self.source_buffers, pushed=self._source_pushed),
        ]
        app = create_app(
            self.workspace, self.config.server, mounts=mounts, settings=lambda: self.config.server
        )
        app[STATE_KEY].withheld = self.withheld
        if self.config.metrics.enabled:
            app.router.add_get("/metrics", self.admin.metrics)
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

    async def _start_flight_sql(self) -> None:
        """Arrow Flight SQL on ``[server] flight_sql_port``, when one is set."""
        self.flight_sql = await self._flight_sql_on(self.config.server)

    async def _flight_sql_on(self, server: ServerConfig) -> FlightSqlEndpoint | None:
        """A Flight SQL server where ``server`` says (None: off); the settings its calls apply
        (tokens, private datasets, time limit) are the daemon's current ones."""
        if server.flight_sql_port is None:
            return None
        from odfd.flight_sql import workspace_queries

        return await workspace_queries.serve(
            self.node,
            address=server.address,
            port=server.flight_sql_port,
            current=lambda: self.node,
        )

    async def _move_flight_sql(self, new: ServerConfig) -> str | None:
        """After a reload: the Flight SQL listener moved to the new address or port, started or
        stopped; one line saying what happened (None: where it was). The new listener starts
        before the old one stops, so one that cannot listen leaves the old one serving."""
        old = self.config.server
        moved = (new.address, new.flight_sql_port) != (old.address, old.flight_sql_port)
        if not moved and (self.flight_sql is None) == (new.flight_sql_port is None):
            return None  # where it was (one that could not listen is tried again)
        from odfd.flight_sql.endpoint import FlightSqlStartError

        previous = self.flight_sql
        try:
            started = await self._flight_sql_on(new)
        except FlightSqlStartError as err:
            where = "off" if previous is None else f"on {previous.url}"
            line = f"Flight SQL stays {where}: {err}"
            log.error("reload: %s", line)
            return line
        if previous is None and started is None:
            return None
        if previous is not None:
            await previous.stop()
        self.flight_sql = started
        line = "Flight SQL is off" if started is None else f"Flight SQL now serves on {started.url}"
        log.info("reload: %s", line)
        return line

    async def _start_admin(self) -> None:
        self._runners.append(await self.admin.start(self.admin_path))

    # --- configuration --------------------------------------------------------------------------

    def _effective(self, config: NodeConfig) -> NodeConfig:
        return replace(config, server=replace(config.server, **self._server_overrides))

    async def reload(self) -> dict[str, Any]:
        """A node with ``config.toml`` read again, swapped in (settings that need a restart are
        reported, not applied), and the mirror list read again."""
        try:
            node = self._reconfigure()
            new = self._effective(node.config)
        except OdfError as err:
            log.error(
                "reload refused: the configuration is invalid; keeping the current one",
                extra={"error": str(err)},
            )
            raise
        needs_restart = [
            name for name in ("spark", "daemon") if getattr(new, name) != getattr(self.config, name)
        ]
        needs_restart += [
            f"server.{key}"
            for key in _SERVER_AT_START
            if getattr(new.server, key) != getattr(self.config.server, key)
        ]
        flight_sql = await self._move_flight_sql(new.server)
        for key in ("max_concurrent", "max_per_peer", "peer_connections"):
            if getattr(new.sync, key) != getattr(self.config.sync, key):
                needs_restart.append(f"sync.{key}")
        if new.audit.max_concurrent != self.config.audit.max_concurrent:
            needs_restart.append("audit.max_concurrent")
        self.node, self.config = node, new
        self.auditor.config = new
        self.reconciler.sync = new.sync
        configure_logging(new.log)
        if not new.audit.withhold_failing:
            self.withheld.clear()
        else:
            await self._load_withheld()
        count = await self.mirror_schedule.load()
        await self.auditor.schedule_all()
        gc.freeze()  # the reloaded mirrors' records and timers too (see start)
        if needs_restart:
            log.warning(
                "reloaded; these settings take effect after a restart",
                extra={"settings": ", ".join(needs_restart)},
            )
        log.info("configuration reloaded", extra={"mirrors": count})
        answer: dict[str, Any] = {"mirrors": count, "needsRestart": needs_restart}
        if flight_sql is not None:
            answer["flightSql"] = flight_sql
        return answer

    async def _reload_on_signal(self) -> None:
        try:
            await self.reload()
        except OdfError:
            pass  # logged by reload(); the daemon runs on with its current configuration

    # --- datasets that moved: transforms and audits -----------------------------------------------

    async def _synced(self, dataset_id: DatasetId) -> None:
        """A sync moved a dataset's head."""
        await self._dataset_moved(dataset_id, "sync")
        # Resources may have waited for this dataset: only those not yet Ready, so a burst of
        # syncs does not re-reconcile thousands of settled Mirror resources each.
        self.chores.run_now(_RECONCILE_UNSETTLED)

    async def _dataset_moved(self, dataset_id: DatasetId, trigger: str) -> None:
        self._in_background(self._ref_updated(dataset_id, trigger), "flows")
        if self.config.audit.after_sync:
            self.auditor.request(dataset_id, "integrity", trigger)
        if self.config.sync.transform_derivatives:
            await self.derivatives.inputs_changed(dataset_id)
        if self.auditor.runner.due_at(dataset_id) is None and self.config.audit.interval > 0:
            self.auditor.runner.schedule_at(
                dataset_id,
                datetime.now(UTC) + jittered(self.config.audit.interval, self.config.sync.jitter),
            )

    async def _ref_updated(self, dataset_id: DatasetId, trigger: str) -> None:
        """``dataset.ref.updated`` for the flows whose Event triggers target this dataset."""
        record = await self.workspace.catalog.get_dataset(dataset_id)
        if record is None:
            return
        event = {
            "type": DATASET_REF_UPDATED,
            "datasetId": str(dataset_id),
            "datasetAlias": str(record.alias),
            "cause": trigger,
        }
        try:
            await self.flows.dataset_updated(str(record.alias), event)
        except Exception:  # a flow's trouble is recorded in its runs; this keeps the daemon up
            log.exception("flows on dataset.ref.updated failed", extra={"dataset": str(dataset_id)})

    async def _source_pushed(self, source: str) -> None:
        """Records reached a pushed Source: its flows' Source triggers may now be due. One check
        runs at a time; pushes arriving meanwhile ask for one more check after it."""
        self._source_check_again = True
        if self._source_checking:
            return
        self._source_checking = True

        async def check() -> None:
            try:
                while self._source_check_again:
                    self._source_check_again = False
                    await self.flows.source_pushed()
            except Exception:  # a flow's trouble is recorded in its runs; this keeps the daemon up
                log.exception("flows on pushed records failed", extra={"source": source})
            finally:
                self._source_checking = False

        self._in_background(check(), "flows")

    async def _ingested(self, dataset_id: DatasetId) -> None:
        """Data pushed over HTTP (``POST /{dataset}/ingest``) moved a dataset's head."""
        await self._dataset_moved(dataset_id, "ingest")

    async def _transformed(self, dataset_id: DatasetId) -> None:
        self._in_background(self._ref_updated(dataset_id, "transform"), "flows")
        if self.config.audit.after_sync:
            self.auditor.request(dataset_id, "integrity", "transform")

    def _apply_verdict(self, audit: AuditRecord) -> None:
        if self.config.audit.withhold_failing:
            if audit.failing:
                self.withheld.add(audit.dataset_id)
            else:
                self.withheld.discard(audit.dataset_id)

    async def _audit_finished(self, audit: AuditRecord) -> None:
        await self._refresh_gauges()
        await self.mirror_schedule.audit_finished(audit)

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
        """Counted in SQL: this runs after every audit, and a node may hold 10,000 datasets."""
        self.metrics.datasets.set(await self.workspace.catalog.count_datasets())
        self.metrics.datasets_failing.set(await self.auditor.table.count_failing())

    # --- controller hooks ------------------------------------------------------------------------

    async def mirror_changed(self, name: str) -> None:
        await self.mirror_schedule.changed(name)
        self._in_background(self.mirror_webhooks.ensure(name), "mirror-subscription")

    async def dataset_changed(self, dataset_id: DatasetId) -> None:
        """A controller created or changed a dataset: a derivative gets its (next) transform."""
        self.derivatives.request(dataset_id)
        await self._refresh_gauges()

    # --- chores: reconcile, housekeeping -----------------------------------------------------------

    async def _chore(self, key: Hashable) -> None:
        now = datetime.now(UTC)
        if key == _RECONCILE:
            self.chores.schedule_at(
                _RECONCILE, now + timedelta(seconds=self.config.daemon.reconcile_interval)
            )  # first: a failure here must not end it
            await self.reconcile_resources()
            await self.mirror_webhooks.ensure()
        elif key == _FLOWS:
            self.chores.schedule_at(_FLOWS, now + _FLOW_TICK)  # first: a failure must not end it
            await self.flows.tick()
        elif key == _RECONCILE_UNSETTLED:
            await self.reconciler.reconcile_all(unsettled_only=True)
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
            await asyncio.to_thread(uploads_of(self.node).sweep)  # expired uploads
            if self.config.sync.transform_derivatives:
                await self.derivatives.catch_up()
            await self._refresh_gauges()

    async def reconcile_resources(self) -> list[dict[str, Any]]:
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

    # --- for the admin API -------------------------------------------------------------------------

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


_SERVER_AT_START = ("address", "port", "url_ttl_seconds")
"""``[server]`` settings a reload does not apply (the HTTP listener and the URL signer are made
at start-up). The others are read at each request, so a reload applies them: tokens, private
datasets, query limits, uploads, the node's key; and a changed ``flight_sql_port`` moves the
Flight SQL listener. The signing key is left out: unless configured it is random per read."""


async def run_daemon(
    node: Node,
    *,
    port: int | None = None,
    address: str | None = None,
    reconfigure: Callable[[], Node] | None = None,
) -> None:
    """``odfd daemon``: run on ``node`` until stopped."""
    overrides = {
        key: value for key, value in (("address", address), ("port", port)) if value is not None
    }
    configure_logging(node.config.log)
    daemon = Daemon(node, server_overrides=overrides, reconfigure=reconfigure)
    await daemon.run()
