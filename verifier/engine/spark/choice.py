"""Which Spark a workspace's commands use: a Connect server, or a JVM of their own.

The ``[spark]`` table of ``config.toml`` holds the operator's choices (see
``verifier.engine.spark.settings.SparkSettings``)::

    [spark]
    master = "local[*]"          # or spark://host:7077, ...
    remote = "sc://host:15002"   # a Spark Connect server instead of a JVM in each process
    driver_memory = "4g"
    local_dir = "/fast/scratch"
    [spark.conf]                 # any other Spark setting odfd does not pin
    "spark.executor.memory" = "8g"

Which engine a command uses, in order: ``[spark] remote`` (or ``ODFD_SPARK_REMOTE``); else the
Spark Connect server of a daemon running on the same workspace (it records itself in
``engine.json``); else a JVM started in the process with ``master``. Spark's own logs go to
``logs/`` in the workspace, never to the terminal. The Spark engine makes this choice when it is
first used (``verifier.engine.spark.engine``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from verifier.engine.spark.connect_server import ServerAddress, is_listening
from verifier.engine.spark.settings import SparkSettings

#: Written by a daemon while its Spark Connect server runs (mode 0600: the URL holds its token).
SERVER_RECORD = "engine.json"
LOG_DIR = "logs"
#: The JVM log of a command that starts Spark itself.
SPARK_LOG = "spark.log"
#: The log of the daemon's Spark Connect server.
CONNECT_LOG = "spark-connect.log"


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """The engine this workspace's commands use, and why (``odfd engine status`` prints it)."""

    settings: SparkSettings
    kind: str
    """``connect`` (a Spark Connect server) or ``local`` (a JVM started in the process)."""
    where: str
    """The server's URL without its token, or the master URL."""
    reason: str


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """What a daemon writes about its Spark Connect server."""

    address: ServerAddress
    server_pid: int
    daemon_pid: int

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "port": self.address.port,
                "token": self.address.token,
                "serverPid": self.server_pid,
                "daemonPid": self.daemon_pid,
            }
        ).encode()


def write_server_record(root: Path, record: ServerRecord) -> None:
    path = root / SERVER_RECORD
    staged = path.with_name(f".{SERVER_RECORD}.tmp")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(record.to_json())
    staged.replace(path)


def remove_server_record(root: Path) -> None:
    (root / SERVER_RECORD).unlink(missing_ok=True)


def live_server(root: Path) -> ServerRecord | None:
    """The daemon's Spark Connect server on this workspace, if its record is there and it answers."""
    try:
        raw = json.loads((root / SERVER_RECORD).read_text())
        record = ServerRecord(
            ServerAddress(int(raw["port"]), raw.get("token")),
            int(raw["serverPid"]),
            int(raw["daemonPid"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (_pid_alive(record.server_pid) and _pid_alive(record.daemon_pid)):
        return None
    if not is_listening("127.0.0.1", record.address.port):
        return None
    return record


def choose_engine(root: Path | None, settings: SparkSettings) -> EngineChoice:
    """The engine commands on the workspace at ``root`` use, given its ``[spark]`` settings
    (without a workspace: the settings as they are)."""
    if settings.remote is not None:
        where = settings.remote.split("/;", 1)[0]
        source = "ODFD_SPARK_REMOTE" if "ODFD_SPARK_REMOTE" in os.environ else "[spark] remote"
        return EngineChoice(settings, "connect", where, f"{source} names a Spark Connect server")
    record = None if root is None else live_server(root)
    if record is not None:
        return EngineChoice(
            replace(settings, remote=record.address.url),
            "connect",
            record.address.display,
            f"the daemon (pid {record.daemon_pid}) runs a Spark Connect server on this workspace",
        )
    return EngineChoice(
        settings,
        "local",
        settings.master,
        "no Spark Connect server is configured or run by a daemon on this workspace: "
        "each command starts its own JVM",
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
