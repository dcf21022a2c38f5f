"""What the console asks of the process serving it. Under ``odfd serve`` and ``odfd ui`` only the
workspace is there (what the catalog knows, no actions); a daemon adds its live queues and
schedule, metrics and the actions (``odfd.daemon.console``). Both sit behind ``NodeBackend``."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, Protocol

from odfd.errors import OdfdError
from storage.workspace import Workspace
from verifier.engine.registry import Engines


class ActionUnavailableError(OdfdError):
    """An action (sync now, audit now) needs a running daemon."""


class NodeBackend(Protocol):
    workspace: Workspace

    @property
    def engines(self) -> Engines:
        """The process's engines (the SQL box's queries, provenance's re-executions)."""
        ...

    def runtime(self) -> dict[str, Any] | None:
        """The daemon's part of ``odfd status`` (queues, pid), ``None`` without a daemon."""
        ...

    def next_runs(self) -> dict[str, datetime]:
        """When each mirror syncs next, as scheduled in memory (empty: the catalog's times)."""
        ...

    def withheld(self) -> set[str]:
        """Ids of the datasets the server withholds."""
        ...

    def metrics(self) -> str | None:
        """The Prometheus exposition text, or ``None`` without a daemon."""
        ...

    async def sync_now(self, mirror: str) -> dict[str, Any]: ...

    async def audit_now(self, dataset: str, scope: str) -> dict[str, Any]: ...


class WorkspaceBackend:
    """A workspace with no daemon."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @functools.cached_property
    def engines(self) -> Engines:
        from odfd.coordinator.engine import open_engines

        return open_engines(self.workspace.layout.config_path)

    def runtime(self) -> dict[str, Any] | None:
        return None

    def next_runs(self) -> dict[str, datetime]:
        return {}

    def withheld(self) -> set[str]:
        return set()

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
