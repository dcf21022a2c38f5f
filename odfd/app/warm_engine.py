"""The node's warm engine: its own Spark Connect server, one JVM for a daemon's work and for the
workspace's CLI commands.

The daemon says when (it starts one before its services, ``[daemon] spark_connect``, unless
``[spark] remote`` names a server, and stops it last, as it does its listeners); this module says
how, so the daemon names no engine's internals. The server is recorded in the workspace's
``engine.json`` for CLI commands to find (``verifier.engine.spark.choice``), watched and restarted on the same port and token if it dies (so
the daemon's configured engine stays valid; its next session connects to the new JVM), and
stopped at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from protocol.errors import OdfError
from verifier.engine.spark.choice import (
    CONNECT_LOG,
    LOG_DIR,
    SERVER_RECORD,
    ServerRecord,
    remove_server_record,
    write_server_record,
)
from verifier.engine.spark.connect_server import (
    MAIN_CLASS,
    LocalConnectServer,
    ServerAddress,
    free_port,
)
from verifier.engine.spark.settings import SparkSettings

log = logging.getLogger("odfd.daemon.engine")
"""Named for the daemon, which runs the server: its lines stay among the daemon's."""

#: How often the server process is checked.
CHECK_INTERVAL = 1.0


class EngineServer:
    def __init__(self, root: Path, settings: SparkSettings, port: int = 0) -> None:
        self._root = root
        self._settings = settings
        self._port = port
        self._server: LocalConnectServer | None = None
        self._watcher: asyncio.Task[None] | None = None
        self.restarts = 0

    @property
    def address(self) -> ServerAddress:
        assert self._server is not None, "the engine server has not been started"
        return self._server.address

    @property
    def pid(self) -> int | None:
        return None if self._server is None else self._server.pid

    async def start(self) -> ServerAddress:
        """Starts the server, waits until it listens, records it; returns its address."""
        await asyncio.to_thread(_stop_orphan, self._root)
        port = self._port or free_port()
        await self._launch(LocalConnectServer(self._settings, port, self._log_path))
        self._watcher = asyncio.create_task(self._watch(), name="engine-server-watch")
        return self.address

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        remove_server_record(self._root)
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)
            log.info("spark connect server stopped", extra={"pid": self._server.pid})

    @property
    def _log_path(self) -> Path:
        return self._root / LOG_DIR / CONNECT_LOG

    async def _launch(self, server: LocalConnectServer) -> None:
        self._server = server
        await asyncio.to_thread(server.start)
        try:
            await asyncio.to_thread(server.wait_ready)
        except BaseException:
            await asyncio.to_thread(server.stop)
            raise
        assert server.pid is not None
        write_server_record(self._root, ServerRecord(server.address, server.pid, os.getpid()))
        log.info(
            "spark connect server running",
            extra={"url": server.address.display, "pid": server.pid, "log": str(self._log_path)},
        )

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL)
            server = self._server
            if server is None or server.alive():
                continue
            remove_server_record(self._root)
            self.restarts += 1
            log.warning(
                "spark connect server exited; restarting",
                extra={"code": server.returncode(), "restarts": self.restarts},
            )
            try:
                await self._launch(
                    LocalConnectServer(self._settings, server.address, server.log_path)
                )
            except (OdfError, OSError) as err:  # logged; the next check tries again
                log.error("spark connect server did not restart", extra={"error": str(err)})


def _stop_orphan(root: Path) -> None:
    """Stops the server a killed daemon left running (its record names it; the lock we hold says
    that daemon is gone), so a crash does not leak a JVM per restart."""
    import json
    import signal

    try:
        pid = int(json.loads((root / SERVER_RECORD).read_text())["serverPid"])
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return
    if MAIN_CLASS.encode() in command:
        log.warning("stopping the Spark Connect server a previous daemon left", extra={"pid": pid})
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    remove_server_record(root)
