"""Turning Spark's failures (JVM exceptions surfacing in Python) into odfd's typed errors.

A query can fail while it runs — a value that does not cast, an arithmetic overflow under ANSI
rules, a file that cannot be read. Those are problems with the user's data or query, reported as
:class:`~verifier.engine.errors.QueryExecutionError` with Spark's own explanation. Whatever else
of Spark's (PySpark, py4j, gRPC) leaves the engine becomes an
:class:`~verifier.engine.errors.EngineFailureError` (:func:`engine_failures`), so callers never
catch Spark's own exception types.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from verifier.engine.errors import EngineFailureError, QueryExecutionError

#: Where the exceptions of Spark's Python client come from.
_SPARK_PACKAGES = ("pyspark", "py4j", "grpc")


def spark_error_types() -> tuple[type[BaseException], ...]:
    """The exception types a failing Spark job raises in Python."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JJavaError)


def describe(err: BaseException) -> str:
    """The most telling line of a Spark failure: the root JVM cause's message if there is one."""
    java = getattr(err, "java_exception", None)
    if java is not None:
        cause = java
        while cause.getCause() is not None:
            cause = cause.getCause()
        message = cause.getMessage() or cause.toString()
    else:
        message = str(err)
    lines = [line for line in str(message).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


@contextmanager
def spark_failures(what: str) -> Iterator[None]:
    """Re-raises a Spark failure inside the block as :class:`QueryExecutionError` about ``what``."""
    try:
        yield
    except spark_error_types() as err:
        raise QueryExecutionError(f"{what} failed: {describe(err)}") from err


@contextmanager
def engine_failures() -> Iterator[None]:
    """Re-raises an exception of Spark's client libraries leaving the block as
    :class:`EngineFailureError` (odfd's own errors pass through)."""
    try:
        yield
    except Exception as err:
        if not type(err).__module__.startswith(_SPARK_PACKAGES):
            raise
        raise EngineFailureError("Spark", _first_line(err)) from err


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
