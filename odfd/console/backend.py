"""What the console asks of the process serving it. Under ``odfd serve`` and ``odfd ui`` only the
node is there (what its catalog knows, no actions); a daemon adds its live queues and schedule,
metrics and the actions (``odfd.daemon.console_backend``). Both sit behind ``NodeBackend``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from odfd.app.node import Node
from odfd.config import NodeConfig
from odfd.errors import OdfdError
from storage.workspace import Workspace


class ActionUnavailableError(OdfdError):
    """An action (sync now, audit now) needs a running daemon."""


class NodeBackend(Protocol):
    @property
    def node(self) -> Node:
        """The node the serving process built (the daemon's current one)."""
        ...

    @property
    def workspace(self) -> Workspace: ...

    @property
    def config(self) -> NodeConfig:
        """The node's configuration as the process serving the console loaded it."""
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
    """A node with no daemon."""

    def __init__(self, node: Node) -> None:
        self._node = node

    @property
    def node(self) -> Node:
        return self._node

    @property
    def workspace(self) -> Workspace:
        return self._node.workspace

    @property
    def config(self) -> NodeConfig:
        return self._node.config

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
