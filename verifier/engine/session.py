"""The one long-lived SparkSession of an odfd process, created on first use.

Starting Spark takes tens of seconds, so a process starts it once and every ingest, transform,
query and verification shares its SparkContext. Each transaction works in its own
:func:`isolated_session` (a ``newSession()`` of the shared one) so that temporary views of
concurrent transactions cannot collide, with the determinism settings re-applied to it.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from verifier.engine.jvm_plugin import plugin_jar
from verifier.engine.settings import DETERMINISM, STARTUP, SparkSettings
from verifier.errors import VerifierError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class EngineStartError(VerifierError):
    """Spark could not be started, or was asked to restart with different settings."""


_lock = threading.Lock()
_settings: SparkSettings | None = None
_session: SparkSession | None = None


def configure(settings: SparkSettings) -> None:
    """Sets the settings the session will be started with.

    Calling it again with equal settings is harmless; different settings after the session has
    started are an error, since Spark cannot change its master or memory in a running process.
    """
    global _settings
    with _lock:
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
    session = get_spark().newSession()
    apply_determinism(session)
    return session


def apply_determinism(session: SparkSession) -> None:
    for key, value in DETERMINISM.items():
        session.conf.set(key, value)


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
    from pyspark.sql import SparkSession

    # Spark errors are turned into odfd's own; PySpark would also log each one as JSON.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    conf = settings.spark_conf(plugin_jar())
    quiet = f"-Dlog4j2.configurationFile={_log_config()}"
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        conf[key] = f"{conf[key]} {quiet}".strip()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as err:  # py4j/JVM start-up failures have no common base class
        raise EngineStartError(
            f"could not start Spark (master {settings.master}): {err}. "
            "odfd needs Java 17 on PATH or JAVA_HOME"
        ) from err
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


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
"""


def _log_config() -> Path:
    """A log4j2 configuration that keeps Spark's JVM to errors only (the CLI shares its stderr)."""
    path = Path(tempfile.gettempdir()) / "odfd-spark-log4j2.properties"
    if not path.is_file() or path.read_text() != _LOG4J2:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
            tmp.write(_LOG4J2)
        Path(tmp.name).replace(path)
    return path
