"""What the console asks of the process serving it. Under ``odfd serve`` and ``odfd ui`` only the
workspace is there (status from the catalog, no actions); the daemon adds its live schedule,
metrics and the actions (``odfd.daemon.console``). Both sit behind ``NodeBackend``."""

from __future__ import annotations

from typing import Any, Protocol

from odfd.daemon.status import build_status
from odfd.errors import OdfdError
from storage.workspace import Workspace


class ActionUnavailableError(OdfdError):
    """An action (sync now, audit now) needs a running daemon."""


class NodeBackend(Protocol):
    workspace: Workspace

    async def status(self) -> dict[str, Any]:
        """``odfd.daemon.status.build_status``'s document."""
        ...

    def metrics(self) -> str | None:
        """The Prometheus exposition text, or ``None`` without a daemon."""
        ...

    async def sync_now(self, mirror: str) -> dict[str, Any]: ...

    async def audit_now(self, dataset: str, scope: str) -> dict[str, Any]: ...


class WorkspaceBackend:
    """A workspace with no daemon: what the catalog knows."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    async def status(self) -> dict[str, Any]:
        return await build_status(self.workspace)

    def metrics(self) -> str | None:
        return None

    async def sync_now(self, mirror: str) -> dict[str, Any]:
        raise ActionUnavailableError(
            f"no daemon runs on {self.workspace.root}: mirrors sync only under `odfd daemon`"
        )

    async def audit_now(self, dataset: str, scope: str) -> dict[str, Any]:
        raise ActionUnavailableError(
            f"no daemon runs on {self.workspace.root}: run `odfd verify {dataset}` instead"
        )
