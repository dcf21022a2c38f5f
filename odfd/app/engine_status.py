"""``odfd engine status``: which engine each command would use on this node, and why. Where a
command runs (in the daemon or in its own process) is the caller's to add: it is the CLI's
choice, not the node's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odfd.app.node import Node
    from verifier.engine.spark.choice import EngineChoice

#: Commands that run Spark, and what for (transforms naming DataFusion run in-process instead).
SPARK_COMMANDS = {
    "ingest": "reads, merges and writes the new data",
    "pull": "ingests polling sources and runs transforms of derivative datasets",
    "sql": "runs the query with --engine spark (the default, DataFusion, runs in-process)",
    "verify": "re-executes transforms (reproducibility); integrity checks need no engine",
    "daemon": "transforms and reproducibility audits",
}


@dataclass(frozen=True, slots=True)
class EngineUse:
    kind: str
    """``connect`` (a Spark Connect server) or ``local`` (a JVM started in the process)."""
    where: str
    """The server's URL without its token, or the master URL."""

    def describe(self) -> str:
        return (
            f"Spark Connect at {self.where}"
            if self.kind == "connect"
            else f"local JVM ({self.where})"
        )


@dataclass(frozen=True, slots=True)
class EngineStatus:
    reason: str
    """Why the commands use the engine they do."""
    engine: EngineUse
    """The engine the workspace's commands use."""
    commands: dict[str, EngineUse]
    """The engine of each of :data:`SPARK_COMMANDS` (the daemon's own included)."""


def engine_status(node: Node) -> EngineStatus:
    from verifier.engine.spark.choice import choose_engine

    config = node.config
    choice = choose_engine(node.root, config.spark)
    engine = EngineUse(choice.kind, choice.where)
    commands = dict.fromkeys(SPARK_COMMANDS, engine)
    commands["daemon"] = _daemon_engine(config.spark.remote, config.daemon.spark_connect, choice)
    return EngineStatus(choice.reason, engine, commands)


def spark_session_running() -> bool:
    """Whether this process holds a Spark session now (started by the work it ran: a command's,
    the daemon's), for pages that show the node's state; choosing one is :func:`engine_status`'s."""
    from verifier.engine.spark import session

    return session.is_running()


def _daemon_engine(remote: str | None, own_server: bool, choice: EngineChoice) -> EngineUse:
    if remote is not None:
        return EngineUse("connect", choice.where)
    if own_server:
        return EngineUse("connect", "a local server it runs itself (loopback)")
    return EngineUse("local", choice.settings.master)
