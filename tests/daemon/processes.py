"""Daemons and CLI commands as real processes (``python -m odfd …``) on loopback, for the
daemon's end-to-end, fault and load tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from tests.fixtures.proc_memory import memory_kib

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]

FAST_SYNC_CONFIG = """
[sync]
startup_spread = "0s"
backoff_initial = "1s"
backoff_max = "2s"
[daemon]
shutdown_timeout = "5s"
reconcile_interval = "2s"
"""


def init_workspace(root: Path, extra_config: str = "") -> None:
    """An empty workspace with ``extra_config`` appended to its ``config.toml``."""
    import asyncio

    from storage.workspace import Workspace

    async def init() -> None:
        async with await Workspace.init(root):
            pass

    asyncio.run(init())
    config = root / "config.toml"
    config.write_text(config.read_text() + extra_config)


def mirror_manifests(
    folder: Path,
    sources: dict[str, str],
    every: str = "1h",
    targets: Mapping[str, Sequence[str]] | None = None,
) -> Path:
    """One YAML file of ``Mirror`` resources: alias -> source URL (and alias -> target URLs)."""
    path = folder / "mirrors.yaml"
    path.write_text(
        "".join(
            f"---\n$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\nheaders:\n  name: {alias}\n"
            f"spec:\n  source: {url}\n  every: {every}\n"
            + _targets_yaml((targets or {}).get(alias, ()))
            for alias, url in sources.items()
        )
    )
    return path


def _targets_yaml(targets: Sequence[str]) -> str:
    return f"  targets: [{', '.join(targets)}]\n" if targets else ""


def odfd(
    *args: str, root: Path, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``odfd ARGS --root ROOT`` and return what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "odfd", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"odfd {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    interval: float = 0.25,
    detail: Callable[[], object] | None = None,
) -> T:
    """Poll ``probe`` until it returns something true; on time-out, ``detail()`` says what was seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; last seen: {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(interval)


@dataclass
class DaemonProcess:
    root: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    server_url: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    def start(self, timeout: float = 60, *, wait: bool = True) -> DaemonProcess:
        """Start and wait until it serves (``wait=False``: just start, e.g. to see it die)."""
        state = self.root / "daemon.json"
        state.unlink(missing_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "odfd", "daemon", "--root", str(self.root), "--port", "0"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.extra_env},
        )
        log.close()
        if not wait:
            return self

        def ready() -> dict[str, Any] | None:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(
                    f"daemon on {self.root} exited {self.process.returncode}:\n{self.log()}"
                )
            try:
                return json.loads(state.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                return None

        self.server_url = wait_for(f"the daemon on {self.root}", ready, timeout)["serverUrl"]
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, and the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        return code

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def status(self) -> dict[str, Any]:
        return json.loads(odfd("status", "-o", "json", root=self.root).stdout)

    def admin(self, method: str, path: str, **params: str) -> Any:
        """One request to the daemon's admin API from this process (polling through the CLI
        would start a Python process per probe)."""
        import asyncio

        from odfd.daemon.admin_client import AdminClient
        from storage.layout import WorkspaceLayout

        async def call() -> Any:
            client = await AdminClient.require(WorkspaceLayout(self.root), None)
            return await client.request(method, path, **params)

        return asyncio.run(call())

    def admin_status(self) -> dict[str, Any]:
        """``odfd status -o json`` as the running daemon answers it."""
        return self.admin("GET", "/status")

    def metrics(self) -> dict[str, float]:
        """``/metrics`` as ``{"name{labels}": value}``."""
        import asyncio

        async def fetch() -> str:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{self.server_url}metrics") as response:
                    assert response.status == 200
                    return await response.text()

        samples = {}
        for line in asyncio.run(fetch()).splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def rss_kib(self) -> int:
        return memory_kib(self.pid)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServeProcess:
    """``odfd serve`` of a workspace as a real process on a fixed port (so it can be killed and
    started again at the same URL)."""

    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 60) -> ServeProcess:
        import socket

        self.process = subprocess.Popen(
            [sys.executable, "-m", "odfd", "serve", "--root", str(self.root)]
            + ["--port", str(self.port)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def listening() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"odfd serve exited {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_for(f"odfd serve on port {self.port}", listening, timeout, 0.1)
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)


#: Seconds a daemon that owns a Spark Connect server may take to start (a JVM on a busy machine).
CONNECT_START_TIMEOUT = 300


@contextmanager
def daemon_with_connect(root: Path) -> Iterator[DaemonProcess]:
    """A daemon on the workspace at ``root`` owning its Spark Connect server, stopped on exit."""
    process = DaemonProcess(
        root, root.parent / "daemon.log", extra_env={"ODFD_DAEMON_SPARK_CONNECT": "true"}
    )
    process.start(timeout=CONNECT_START_TIMEOUT)
    try:
        yield process
    finally:
        process.stop()
