"""Keeping local derivative datasets up to date: when a mirror (or a transform) moves the head
of a dataset, every local derivative reading it runs its next transform transaction, then the
derivatives reading *that* one, and so on down the graph.

A head can also move without that trigger: a sync cancelled at shutdown after its head move
(the next sync finds nothing new), a transform cancelled or failed, a pull or ingest by another
process. ``catch_up`` finds every derivative whose inputs are past what its last
``ExecuteTransform`` consumed and queues it; the daemon runs it at start-up and hourly.

Mirrored derivatives are skipped: their blocks come from their source. Transforms run one at a
time per daemon on the shared SparkSession (``[daemon] spark_jobs`` bounds all Spark work).
Each is the application layer's ``odfd pull DERIVATIVE`` (``odfd.app.pull.pull_local``): run
again once if another write moved the head first, its head move in the write log as the daemon's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from odfd.app import derivative_inputs
from odfd.app.engine_jobs import cancellable_engine_work
from odfd.app.events import Event
from odfd.app.mirror_sync import describe_error
from odfd.app.node import Node
from odfd.app.pull import LocalPull, PullRetrying, pull_local
from odfd.app.write_log import DAEMON
from odfd.daemon.jobs import JobRunner
from odfd.daemon.metrics import DaemonMetrics
from protocol.errors import OdfError
from protocol.identity import DatasetId
from protocol.model import DatasetKind

log = logging.getLogger(__name__)


class DerivativeUpdater:
    """The transform queue of the daemon's node (``current``: the node a reload swapped in, over
    the same workspace and engines)."""

    def __init__(
        self,
        current: Callable[[], Node],
        metrics: DaemonMetrics,
        spark_gate: asyncio.Semaphore,
        on_updated: Callable[[DatasetId], Awaitable[None]],
    ) -> None:
        self._current = current
        self.workspace = current().workspace
        self.metrics = metrics
        self._spark_gate = spark_gate
        self._on_updated = on_updated
        self.runner = JobRunner("transform", self._run, 1)

    async def dependants(self, dataset_id: DatasetId) -> list[DatasetId]:
        """Local, non-mirrored derivative datasets that read ``dataset_id``."""
        return await derivative_inputs.dependants(self.workspace, dataset_id)

    async def catch_up(self) -> list[DatasetId]:
        """Queue every derivative whose inputs moved past what its last ``ExecuteTransform``
        consumed (or that never ran one while an input has blocks); returns them. Derivatives
        already queued or running are left alone, and so are inputs missing from the workspace
        (the transform could not read them). A chain that cannot be read skips its derivative
        (the audits report it), not the sweep."""
        inputs = derivative_inputs.InputHeads(self.workspace)
        queued = []
        for record in await derivative_inputs.local_derivatives(self.workspace):
            if self.runner.is_busy(record.id):
                continue
            try:
                moved = await inputs.moved(record)
            except OdfError as err:
                log.warning(
                    "derivative not checked for new input data",
                    extra={"dataset": record.alias, "error": describe_error(err)},
                )
                continue
            if moved:
                log.info(
                    "derivative behind its inputs: transform queued",
                    extra={"dataset": record.alias, "inputs": ", ".join(moved)},
                )
                self.runner.run_now(record.id)
                queued.append(record.id)
        return queued

    async def inputs_changed(self, dataset_id: DatasetId) -> None:
        for dependant in await self.dependants(dataset_id):
            self.runner.run_now(dependant)

    def request(self, dataset_id: DatasetId) -> None:
        self.runner.run_now(dataset_id)

    async def _run(self, key: Hashable) -> None:
        assert isinstance(key, DatasetId)
        record = await self.workspace.catalog.get_dataset(key)
        if record is None or record.kind is not DatasetKind.DERIVATIVE:
            return
        try:
            async with self._spark_gate, cancellable_engine_work(f"transform-{record.alias}"):
                [outcome] = await pull_local(
                    self._current(), [str(key)], LocalPull(), _LogRetries(), actor=DAEMON
                )
        except Exception as err:  # noqa: BLE001 - logged and counted; retried when an input moves or by catch_up
            self.metrics.transforms.labels("failed").inc()
            log.error(
                "transform failed", extra={"dataset": record.alias, "error": describe_error(err)}
            )
            return
        if not outcome.updated:
            self.metrics.transforms.labels("unchanged").inc()
            log.debug(
                "transform up to date", extra={"dataset": record.alias, "reason": outcome.message}
            )
            return
        self.metrics.transforms.labels("updated").inc()
        moved = await self.workspace.catalog.get_dataset(key)
        log.info(
            "transform committed",
            extra={
                "dataset": record.alias,
                "records": outcome.num_records,
                "head": str(None if moved is None else moved.head),
            },
        )
        await self._on_updated(key)
        await self.inputs_changed(key)


class _LogRetries:
    """The events of a daemon's transform: a retry on the head another write moved is logged."""

    def emit(self, event: Event) -> None:
        if isinstance(event, PullRetrying):
            log.info(
                "transform lost the race for the head: run again on top of it",
                extra={"dataset": event.alias, "head": event.head},
            )
