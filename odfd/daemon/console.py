"""The console's view of a running daemon: its queues and in-memory schedule, metrics, and the
actions (sync a mirror now, audit a dataset now) the admin API also offers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from odfd.daemon.admin import AdminTarget
from odfd.errors import OdfdError
from protocol.identity import DatasetRef


class ConsoleActionError(OdfdError):
    """An action asked of the daemon through the console is malformed."""


class DaemonBackend:
    def __init__(self, daemon: AdminTarget) -> None:
        self.daemon = daemon
        self.workspace = daemon.workspace
        self.engines = daemon.engines

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
