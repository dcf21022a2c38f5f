"""The one long-lived SparkSession of an odfd process, created on first use.

Starting Spark takes tens of seconds, so a process starts it once and every ingest, transform,
query and verification shares its SparkContext. Each transaction works in its own
:func:`isolated_session` (a ``newSession()`` of the shared one) so that temporary views of
concurrent transactions cannot collide, with the determinism settings re-applied to it.

With ``remote`` set (``[spark] remote``, or the daemon's own server found by ``choice``) the
process starts no JVM: it is a Spark Connect client, each isolated session is a server-side session
of its own, and the server must run odfd's plugin and start-up settings (checked on first use).
A process is one or the other: PySpark's functions build classic or Connect columns depending on
``internals.CONNECT_MODE_ENV``, which :func:`get_spark` sets for Connect.

The process's engine objects (``verifier.engine.spark.engine.SparkEngine``) configure it; nothing
else calls :func:`configure`.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from verifier.engine.errors import EngineStartError
from verifier.engine.spark import internals
from verifier.engine.spark.jvm_plugin import plugin_jar
from verifier.engine.spark.release import release_on_close
from verifier.engine.spark.settings import DETERMINISM, STARTUP, SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_CLASSIC_CLIENT_ONLY = "spark.sql.execution.arrow.pyspark."
_lock = threading.Lock()
_settings: SparkSettings | None = None
_session: SparkSession | None = None
_log_path: Path | None = None
_shared_filesystem = False


def configure(settings: SparkSettings, log_path: Path | None = None) -> None:
    """Sets the settings the session will be started with, and the file Spark's JVM logs to
    (default: errors only, on stderr).

    Calling it again with equal settings is harmless; different settings after the session has
    started are an error, since Spark cannot change its master or memory in a running process.
    """
    global _settings, _log_path
    with _lock:
        if log_path is not None and _session is None:
            _log_path = log_path
        if _session is not None and _settings != settings:
            raise EngineStartError(
                "the Spark session is already running with different settings "
                f"(master {_settings.master if _settings else '?'}); restart the process to change them"
            )
        _settings = settings


def get_spark() -> SparkSession:
    """The process's SparkSession, started with the configured settings on the first call."""
    global _session, _settings
    with _lock:
        if _session is None:
            if _settings is None:
                _settings = SparkSettings()
            _session = _start(_settings)
        return _session


def isolated_session() -> SparkSession:
    """A session sharing the process's SparkContext but with its own temporary views."""
    spark = get_spark()
    if _settings is not None and _settings.remote is not None:
        session = _connect_session(_settings.remote)
    else:
        session = spark.newSession()
    apply_determinism(session)
    return session


def apply_determinism(session: SparkSession) -> None:
    if internals.is_connect(session):
        # The `arrow.pyspark` settings steer a classic client's collection; Connect always
        # sends Arrow and refuses them.
        pins = {k: v for k, v in DETERMINISM.items() if not k.startswith(_CLASSIC_CLIENT_ONLY)}
        internals.set_confs(session, pins)
        return
    for key, value in DETERMINISM.items():
        session.conf.set(key, value)


def shares_filesystem() -> bool:
    """Whether the process's Spark Connect server writes files where this process reads them
    (``SparkSettings.shared_filesystem``)."""
    return _session is not None and _shared_filesystem


def is_running() -> bool:
    return _session is not None


def stop() -> None:
    """Stops the session (tests and orderly shutdown); the next :func:`get_spark` restarts it."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None


def _start(settings: SparkSettings) -> SparkSession:
    if settings.remote is not None:
        return _start_connect(settings)
    from pyspark.sql import SparkSession

    # Spark errors are turned into odfd's own; PySpark would also log each one as JSON.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    conf = settings.spark_conf(plugin_jar())
    quiet = f"-Dlog4j2.configurationFile={log_config(_log_path)}"
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        conf[key] = f"{conf[key]} {quiet}".strip()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with _jvm_stderr_to(_log_path):
            session = builder.getOrCreate()
    except Exception as err:  # py4j/JVM start-up failures have no common base class
        raise EngineStartError(_start_failure(settings, err, _log_path)) from err
    session.sparkContext.setLogLevel("ERROR")
    started = session.sparkContext.getConf()
    mismatched = sorted(k for k, v in STARTUP.items() if started.get(k, None) != v)
    if mismatched:
        raise EngineStartError(
            f"the Spark context was started elsewhere without odfd's settings ({', '.join(mismatched)}); "
            "odfd must start Spark itself"
        )
    apply_determinism(session)
    return session


def _start_failure(settings: SparkSettings, err: Exception, log_path: Path | None) -> str:
    """Names the likely cause: no Java at all, else the operator's Spark settings."""
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if java_path() is None:
        return f"could not start Spark: {reason}; odfd needs Java 17 on PATH or JAVA_HOME"
    memory = f", driver_memory {settings.driver_memory}" if settings.driver_memory else ""
    log = f"; the JVM's own messages are in {log_path}" if log_path is not None else ""
    return (
        f"could not start Spark (master {settings.master}{memory}): {reason}; Java was found, "
        f"so check the [spark] settings in config.toml and the ODFD_SPARK_* variables{log}"
    )


def java_path() -> str | None:
    """The ``java`` Spark will run: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


@contextmanager
def _jvm_stderr_to(log_path: Path | None) -> Iterator[None]:
    """While the JVM is launched, file descriptor 2 is ``log_path``: the JVM inherits it, so what
    it prints itself (JVM warnings, output outside log4j) goes to the log, not the terminal."""
    if log_path is None:
        yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _start_connect(settings: SparkSettings) -> SparkSession:
    """The process's default Connect session, after checking the server runs odfd's settings."""
    global _shared_filesystem
    url = settings.remote or ""
    parts = urlsplit(url)
    if not _reachable(parts.hostname or "localhost", parts.port or 15002):
        raise EngineStartError(
            f"cannot reach the Spark Connect server at {_display(url)} (nothing listens there)"
        )
    os.environ[internals.CONNECT_MODE_ENV] = "1"
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    session = _connect_session(url)
    mismatched = sorted(k for k, v in STARTUP.items() if session.conf.get(k, None) != v)
    if mismatched:
        session.stop()
        raise EngineStartError(
            f"the Spark Connect server at {_display(url)} runs without odfd's settings "
            f"({', '.join(mismatched)}); start it as README's 'Spark on a cluster' shows"
        )
    apply_determinism(session)
    _shared_filesystem = settings.shared_filesystem
    return session


def _connect_session(url: str) -> SparkSession:
    """A new server-side session, released when the session object is collected (``release``)."""
    session = internals.new_connect_session(url)
    release_on_close(internals.connect_client(session))
    return session


def _reachable(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except OSError:
        return False


def _display(url: str) -> str:
    """``url`` without its parameters (a token must not reach logs or messages)."""
    return url.split("/;", 1)[0]


_LOG4J2_STDERR = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
"""

_LOG4J2_FILE = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c{{1}}: %m%n%ex
"""


def log_config(log_path: Path | None) -> Path:
    """A log4j2 configuration for Spark's JVM: warnings and errors with their stack traces to
    ``log_path`` (the CLI's terminal stays clean; failures reach the user as odfd's one-line
    errors), or errors only to stderr when there is no file."""
    if log_path is None:
        text = _LOG4J2_STDERR
        path = Path(tempfile.gettempdir()) / "odfd-spark-log4j2.properties"
    else:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        text = _LOG4J2_FILE.format(path=log_path)
        path = log_path.with_name(log_path.name + ".log4j2.properties")
    if not path.is_file() or path.read_text() != text:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
            tmp.write(text)
        Path(tmp.name).replace(path)
    return path
