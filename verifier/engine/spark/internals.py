"""Every use odfd makes of PySpark's private or undocumented API, in one place.

PySpark's public API has no streaming, order-preserving Arrow collection, no analysed-plan
determinism flag, no way to clear a thread's job group or set several Connect settings in one
round trip, and no way to release a Connect session without waiting for retries. odfd needs all
of them, so it uses what ``toArrow()``, ``explain()`` and PySpark's own tests use. A PySpark
upgrade may rename or reshape any of these: ``tests/pipeline/test_spark_internals.py`` checks
each one exists and behaves as used here, and fails naming the one that broke. Nothing else
in odfd touches an underscore name of PySpark or imports its internal modules.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Makes PySpark's functions build Spark Connect columns (a process is a classic PySpark
#: program or a Connect client; this decides which).
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"

_CONNECT_MODULES = "pyspark.sql.connect"


def is_connect(obj: object) -> bool:
    """Whether ``obj`` (a session or a DataFrame) is Spark Connect's, not classic PySpark's:
    Connect's classes live in their own modules."""
    return type(obj).__module__.startswith(_CONNECT_MODULES)


def parse_ddl(session: SparkSession, text: str) -> Any:
    """A DDL column list (``a STRING, b BIGINT NOT NULL``) parsed by ``session``'s own parser:
    PySpark's ``StructType.fromDDL`` asks for a classic SparkContext of the process, which a
    Spark Connect client does not have."""
    if is_connect(session):
        return session._parse_ddl(text)
    return session.sparkContext._parse_ddl(text)


def spark_home() -> Path:
    """The pyspark package's folder: Spark's ``jars/`` and ``bin/`` (``spark-submit``)."""
    import pyspark

    return Path(pyspark.__file__).parent


# --- schemas -------------------------------------------------------------------------------------


def to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark uses when it sends rows of ``schema`` to Python (timestamps in
    UTC; a struct with duplicated field names is an error, as in ``toArrow()``)."""
    from pyspark.sql.pandas.types import to_arrow_schema as convert

    return convert(schema, error_on_duplicated_field_names_in_struct=True, timestamp_utc=True)


def from_arrow_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema (``createDataFrame`` from Arrow makes the same)."""
    from pyspark.sql.pandas.types import from_arrow_schema as convert

    return convert(schema)


# --- classic PySpark (a JVM in this process) -----------------------------------------------------


@contextmanager
def arrow_collection(df: DataFrame) -> Iterator[Iterator[pa.RecordBatch | list[int]]]:
    """``df``'s result as Spark's Arrow collection sends it: record batches as partitions finish
    (out of order), then one list giving the batches' order. The JVM's outcome of the job is
    raised on exit, as a PySpark error (``toArrow()``'s own path, without holding the result)."""
    from pyspark.errors.exceptions.captured import unwrap_spark_exception
    from pyspark.sql.pandas.serializers import ArrowCollectSerializer
    from pyspark.util import _load_from_socket

    port, secret, server = df._jdf.collectAsArrowToPython()
    try:
        yield _load_from_socket((port, secret), ArrowCollectSerializer())
    finally:
        with unwrap_spark_exception():
            server.getResult()


def analyzed_plan(df: DataFrame) -> tuple[str, bool]:
    """The analysed logical plan of a classic DataFrame as Spark prints it, and whether Spark
    considers every expression in it deterministic."""
    plan = df._jdf.queryExecution().analyzed()
    return str(plan.treeString()), bool(plan.deterministic())


def clear_job_group(context: SparkContext) -> None:
    """Clears the calling thread's job group (PySpark only sets one); pool threads are reused,
    and the next job must not join a finished task's group."""
    context._jsc.clearJobGroup()


# --- Spark Connect -------------------------------------------------------------------------------


def new_connect_session(url: str) -> SparkSession:
    """A new server-side session of the Connect server at ``url`` (``sc://host:port/;token=…``)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    return ConnectSession(connection=url)  # type: ignore[return-value]  # a Connect session stands in for the classic SparkSession type


def connect_client(session: SparkSession) -> object:
    """The client object behind a Connect session (what :func:`release_connect_client` takes)."""
    return session.client  # type: ignore[operator]  # Connect sessions only; the classic type reads it as a method


def release_connect_client(client: Any) -> None:
    """Frees the server state of a client's session and closes its channel, in one attempt
    (no retries); raises when the server does not answer."""
    client.set_retry_policies([])
    try:
        client.release_session()
    finally:
        client._channel.close()


def divert_close(client: Any, close: Callable[[Any], None]) -> None:
    """Makes ``client.close()`` call ``close(client)`` instead of PySpark's own.

    A Connect session's ``__del__`` calls ``client.close()``, which shuts down PySpark's one
    ReleaseExecute thread pool, shared by every session of the process, waiting under a
    class-wide lock. A session is collected in whatever thread drops it, or at any allocation of
    any thread (the cyclic collector): inside that pool's ``submit`` the shutdown deadlocks and
    every later result stream of the process blocks on the lock; in one of the pool's threads it
    fails half-way, and every later stream fails ("cannot schedule new futures after shutdown").
    """
    client.close = functools.partial(close, client)


def set_confs(session: SparkSession, confs: Mapping[str, str]) -> None:
    """Sets several settings of a Connect session in one round trip (``conf.set`` is one
    each)."""
    session.conf._set_all(configs=dict(confs), silent=False)  # type: ignore[attr-defined]


@contextmanager
def connect_arrow_stream(df: DataFrame) -> Iterator[Iterator[Any]]:
    """``df``'s result as a Connect server streams it: Arrow tables in partition order (with
    other items between them, such as metrics); the stream is closed on exit."""
    client: Any = df.sparkSession.client  # type: ignore[operator]
    plan: Any = df._plan
    stream = client.to_table_as_iterator(plan.to_proto(client), plan.observations)
    try:
        yield stream
    finally:
        stream.close()


def connect_analyzed_plan_text(df: DataFrame) -> str:
    """The analysed logical plan of a Connect DataFrame, as Spark prints it (the only form a
    Connect client can have it in)."""
    text: str = df._explain_string(extended=True)  # type: ignore[operator]
    _, _, rest = text.partition("== Analyzed Logical Plan ==")
    return rest.partition("== Optimized Logical Plan ==")[0]
