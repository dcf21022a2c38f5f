"""A local Spark Connect server with odfd's plugin and determinism settings, in its own JVM.

The server ships in the pyspark package (``jars/spark-connect_*.jar``; its main class is
``org.apache.spark.sql.connect.service.SparkConnectServer``, which ``bin/spark-submit`` runs like
Spark's own ``sbin/start-connect-server.sh``, absent from the wheel). Keeping one warm JVM per node
spares each command Spark's start-up; the daemon owns one (``odfd.app.warm_engine``), and
records it for the workspace's commands (``verifier.engine.spark.choice``). It
listens on loopback only and requires a random bearer token, so only whoever can read the
workspace's ``engine.json`` (mode 0600) can use it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from verifier.engine.spark.internals import CONNECT_MODE_ENV, spark_home
from verifier.engine.spark.jvm_plugin import plugin_jar
from verifier.engine.spark.settings import SparkSettings
from verifier.errors import VerifierError

MAIN_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "localhost"


class ConnectServerError(VerifierError):
    """The local Spark Connect server could not be started or died while starting."""


@dataclass(frozen=True, slots=True)
class ServerAddress:
    """Where a Spark Connect server listens and the token it requires (None: no token)."""

    port: int
    token: str | None
    host: str = HOST

    @property
    def url(self) -> str:
        """The ``sc://`` URL a client connects with (the token is part of it)."""
        suffix = f"/;token={self.token}" if self.token else ""
        return f"sc://{self.host}:{self.port}{suffix}"

    @property
    def display(self) -> str:
        """The URL without its token, for logs and messages."""
        return f"sc://{self.host}:{self.port}"


def new_token() -> str:
    return secrets.token_hex(16)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class LocalConnectServer:
    """One ``spark-submit`` child process running the Connect server; its output goes to a file."""

    def __init__(
        self, settings: SparkSettings, address: ServerAddress | int, log_path: Path
    ) -> None:
        """``address``: a port (a fresh token is made) or the address of a server to replace."""
        self.settings = settings
        self.address = (
            address if isinstance(address, ServerAddress) else ServerAddress(address, new_token())
        )
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Launches the JVM (returns at once; :meth:`wait_ready` waits for it to listen)."""
        home = spark_home()
        conf = self.settings.spark_conf(plugin_jar())
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log4j = self.log_path.with_suffix(".log4j2.properties")
        log4j.write_text(_LOG4J2)
        quiet = f"-Dlog4j2.configurationFile={log4j}"
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            conf[key] = f"{conf[key]} {quiet}".strip()
        conf["spark.connect.grpc.binding.address"] = "127.0.0.1"
        conf["spark.connect.grpc.binding.port"] = str(self.address.port)
        argv = [*_die_with_parent(), str(home / "bin" / "spark-submit"), "--class", MAIN_CLASS]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        argv.append("spark-internal")
        env = dict(os.environ, SPARK_HOME=str(home))
        env.pop("SPARK_REMOTE", None)
        env.pop(CONNECT_MODE_ENV, None)
        env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = self.address.token or ""
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C meant for the CLI does not reach the JVM
            )

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Blocks until the server accepts connections; raises if it exits or times out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ConnectServerError(
                    f"the Spark Connect server exited while starting (code "
                    f"{self.returncode()}); see {self.log_path}"
                )
            if is_listening("127.0.0.1", self.address.port):
                return
            time.sleep(0.2)
        self.stop()
        raise ConnectServerError(
            f"the Spark Connect server did not listen on port {self.address.port} within "
            f"{timeout:.0f}s; see {self.log_path}"
        )

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def returncode(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def stop(self, timeout: float = 30.0) -> None:
        """Asks the JVM to stop (SIGTERM runs Spark's shutdown hooks), kills it after ``timeout``."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _die_with_parent() -> list[str]:
    """``setpriv --pdeathsig TERM`` where util-linux has it: the kernel sends the JVM SIGTERM when
    the process that started it dies, even by ``kill -9``, so a crashed daemon leaks no server.
    (The kernel watches the thread that forked it; the daemon's executor threads live as long as
    the daemon.)"""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %p %c{1}: %m%n
"""
