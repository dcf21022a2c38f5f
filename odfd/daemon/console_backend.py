"""The daemon's backend of the web console: its queues and in-memory schedule, metrics, the
configuration it runs with, and the actions (sync a mirror now, audit a dataset now) the admin
API also offers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from odfd.app.node import Node
from odfd.config import NodeConfig
from odfd.daemon.admin import AdminTarget
from odfd.errors import OdfdError
from protocol.identity import DatasetRef
from storage.workspace import Workspace


class ConsoleActionError(OdfdError):
    """An action asked of the daemon through the console is malformed."""


class DaemonBackend:
    def __init__(self, daemon: AdminTarget) -> None:
        self.daemon = daemon

    @property
    def node(self) -> Node:
        return self.daemon.node

    @property
    def workspace(self) -> Workspace:
        return self.daemon.workspace

    @property
    def config(self) -> NodeConfig:
        """What the daemon loaded last (a reload swaps it)."""
        return self.daemon.config

    def runtime(self) -> dict[str, Any] | None:
        return self.daemon.runtime()

    def next_runs(self) -> dict[str, datetime]:
        return {str(name): due for name, due in self.daemon.syncs.scheduled().items()}

    def withheld(self) -> set[str]:
        return {str(dataset_id) for dataset_id in self.daemon.withheld}

    def metrics(self) -> str | None:
        self.daemon.metrics.queue_depth.set(self.daemon.syncs.queued)
        return self.daemon.metrics.exposition().decode()

    async def sync_now(self, mirror: str) -> dict[str, Any]:
        record = await self.daemon.mirrors.require(mirror)
        self.daemon.syncs.run_now(record.name)
        return {"queued": record.name}

    async def audit_now(self, dataset: str, scope: str) -> dict[str, Any]:
        if scope not in ("full", "integrity"):
            raise ConsoleActionError(f"scope must be full or integrity, not {scope!r}")
        record = await self.workspace.resolve(DatasetRef.parse(dataset))
        self.daemon.auditor.request(record.id, scope, "console")  # type: ignore[arg-type]  # scope was checked against the two Scope values above
        return {"queued": record.alias, "scope": scope}
