"""Keeping local derivative datasets up to date: when a mirror (or a transform) moves the head
of a dataset, every local derivative reading it runs its next transform transaction, then the
derivatives reading *that* one, and so on down the graph.

Mirrored derivatives are skipped: their blocks come from their source. Transforms run one at a
time per daemon on the shared SparkSession (``[daemon] spark_jobs`` bounds all Spark work).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from protocol.identity import DatasetId
from protocol.model import DatasetKind
from storage.catalog.mirrors import MirrorTable
from storage.workspace import Workspace

from odfd.coordinator.transform import update_derivative
from odfd.daemon.jobs import JobRunner
from odfd.daemon.metrics import DaemonMetrics
from odfd.daemon.mirror_sync import describe_error

log = logging.getLogger(__name__)


class DerivativeUpdater:
    def __init__(self, workspace: Workspace, metrics: DaemonMetrics, spark_gate: asyncio.Semaphore,
                 on_updated: Callable[[DatasetId], Awaitable[None]]) -> None:
        self.workspace = workspace
        self.metrics = metrics
        self._spark_gate = spark_gate
        self._on_updated = on_updated
        self.runner = JobRunner("transform", self._run, 1)

    async def dependants(self, dataset_id: DatasetId) -> list[DatasetId]:
        """Local, non-mirrored derivative datasets that read ``dataset_id``."""
        mirrored = {m.name.lower() for m in await MirrorTable(self.workspace.catalog).list()}
        found = []
        for record in await self.workspace.list_datasets():
            if record.kind is not DatasetKind.DERIVATIVE or record.alias.lower() in mirrored:
                continue
            state = await self.workspace.open_dataset(record.id).chain.state()
            if dataset_id in state.transform_input_ids:
                found.append(record.id)
        return found

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
            async with self._spark_gate:
                outcome = await update_derivative(self.workspace, self.workspace.open_dataset(key))
        except Exception as err:  # noqa: BLE001 - a failed transform is logged and counted; inputs retry it
            self.metrics.transforms.labels("failed").inc()
            log.error("transform failed", extra={"dataset": record.alias, "error": describe_error(err)})
            return
        if outcome.up_to_date:
            self.metrics.transforms.labels("unchanged").inc()
            log.debug("transform up to date", extra={"dataset": record.alias, "reason": outcome.reason})
            return
        self.metrics.transforms.labels("updated").inc()
        log.info("transform committed", extra={"dataset": record.alias, "records": outcome.num_records,
                                               "head": str(outcome.new_head)})
        await self._on_updated(key)
        await self.inputs_changed(key)
