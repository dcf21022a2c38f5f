"""What a flow's tasks do on this node, and which datasets a flow targets.

``Compaction`` compacts each targeted dataset as ``odfd compact`` does (a dataset with nothing to
compact is fine; a copy pulled from elsewhere fails the run); ``GarbageCollection`` removes the
workspace's leftovers as ``odfd system gc`` does; ``WebhookCall`` delivers its rendered ``payload``
(:mod:`odfd.flows.payload`; without one, the triggering event or a run notice) to the named
``WebhookTarget``; ``Ingest`` runs the named ``Source`` resource into each targeted dataset
(``odfd.sources.ingest``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from odfd.app.events import DiscardEvents
from odfd.app.node_secrets import NodeSecrets
from odfd.app.resource_types import DATASET, WEBHOOK_TARGET
from odfd.app.selectors import Selector, like
from odfd.app.write_log import DAEMON
from odfd.errors import OdfdError
from odfd.flows.payload import Payload, PayloadError, RunContext
from odfd.flows.spec import FlowSpec, Task
from odfd.sources.buffers import SourceBuffers
from odfd.sources.ingest import Moved, SourceIngest, ingest_params
from odfd.webhooks.delivery import WebhookDeliverer, WebhookTarget
from storage.catalog.resources import ResourceRecord, ResourceTable

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.coordinator.compact import CompactionOptions

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


class TaskError(OdfdError):
    """A task that could not do its job; the run fails with this message."""


def parse_size(value: Any) -> int:
    """Bytes in ``100MiB``, ``20MB``, ``4096``."""
    match = _SIZE.match(str(value))
    if match is None:
        raise TaskError(f"{value!r} is not a size (e.g. 100MiB, 20MB, 4096)")
    return int(match[1]) * _UNITS[(match[2] or "b").lower()]


class WorkspaceTargets:
    """Datasets of the workspace whose name matches the selector's pattern, and whose
    ``Dataset`` resource carries the selector's labels (when it asks for labels)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.resources = ResourceTable(node.workspace.catalog)

    async def datasets(self, spec: FlowSpec) -> list[str]:
        labels = await self.dataset_resources()
        return sorted(
            str(dataset.alias)
            for dataset in await self.node.workspace.list_datasets()
            if selects(spec.target, str(dataset.alias), labels.get(str(dataset.alias).lower()))
        )

    async def dataset_resources(self) -> dict[str, ResourceRecord]:
        """The ``Dataset`` resources (their labels), by lowercased alias."""
        return {r.name.lower(): r for r in await self.resources.list(DATASET.schema)}


def selects(selector: Selector, alias: str, resource: ResourceRecord | None) -> bool:
    """Whether ``selector`` picks the dataset ``alias``, whose ``Dataset`` resource is
    ``resource`` (None: it has none, so it carries no labels)."""
    if selector.schema not in (None, DATASET.schema):
        return False
    if resource is not None:
        return selector.matches(resource)
    return not selector.labels and (selector.name is None or like(selector.name, alias))


def compaction_options(task: Task) -> CompactionOptions:
    """A ``Compaction`` task's limits as its runs use them (``odfd compact``'s by default)."""
    from odfd.coordinator.compact import (
        DEFAULT_MAX_SLICE_RECORDS,
        DEFAULT_MAX_SLICE_SIZE,
        CompactionOptions,
    )

    params = task.params
    return CompactionOptions(
        max_slice_size=parse_size(params.get("maxSliceSize", DEFAULT_MAX_SLICE_SIZE)),
        max_slice_records=int(params.get("maxSliceRecords", DEFAULT_MAX_SLICE_RECORDS)),
    )


class NodeTasks:
    def __init__(
        self,
        node: Node,
        deliverer: WebhookDeliverer,
        buffers: SourceBuffers | None = None,
        moved: Moved | None = None,
    ) -> None:
        self.node = node
        self.deliverer = deliverer
        self.sources = SourceIngest(node, buffers or SourceBuffers(), moved)
        self.resources = ResourceTable(node.workspace.catalog)
        self.secrets = NodeSecrets(node.workspace.keys)

    async def run(
        self,
        task: Task,
        datasets: list[str],
        event: dict[str, Any] | None,
        *,
        context: RunContext | None = None,
    ) -> None:
        if task.kind == "Compaction":
            await self._compact(task, datasets)
        elif task.kind == "GarbageCollection":
            await self._gc()
        elif task.kind == "WebhookCall":
            await self._webhook(task, datasets, event, context)
        else:
            assert task.target is not None  # FlowSpec requires an Ingest task's source
            await self.sources.run(task.target, datasets, ingest_params(task.params))

    async def _compact(self, task: Task, datasets: list[str]) -> None:
        from odfd.app.history import compact_datasets

        if datasets:
            await compact_datasets(
                self.node,
                datasets,
                compaction_options(task),
                confirm=lambda _: None,
                sink=DiscardEvents(),
                actor=DAEMON,
            )

    async def _gc(self) -> None:
        from odfd.coordinator import leftovers

        workspace = self.node.workspace
        older_than = 3600.0  # never what a running command may still be writing
        found = (
            await leftovers.run_scratch(workspace, older_than)
            + await leftovers.unreferenced_objects(workspace, older_than)
            + await leftovers.staging_files(workspace, older_than)
        )
        await leftovers.remove(found)

    async def _webhook(
        self,
        task: Task,
        datasets: list[str],
        event: dict[str, Any] | None,
        context: RunContext | None,
    ) -> None:
        records = [
            r
            for r in await self.resources.list(WEBHOOK_TARGET.schema)
            if task.target is not None and r.name.lower() == task.target.lower()
        ]
        if not records:
            raise TaskError(f"WebhookTarget {task.target!r} does not exist")
        target = WebhookTarget.from_record(records[0], self.secrets)
        data: Any = event if event is not None else {"datasets": datasets}
        if task.payload is not None and context is not None:
            try:
                data = Payload.parse(task.payload, "payload").render(context)
            except PayloadError as err:
                raise TaskError(str(err)) from None
        outcome = await self.deliverer.deliver(
            target, str(data.get("type", "flow.run")) if event else "flow.run", data
        )
        if not outcome.delivered:
            raise TaskError(
                f"webhook to {target.name} failed after {outcome.attempts} attempt(s): "
                f"{outcome.error}"
            )
