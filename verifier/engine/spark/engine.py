"""The Spark engine behind :class:`verifier.engine.contract.IngestEngine`.

An adapter over this package: transforms (``transform``), raw queries, ingest (``ingest``). It is
built with the node's ``[spark]`` settings and the workspace, and on first use chooses where Spark
runs (``choice``: a Connect server, the daemon's own, or a JVM in the process) and configures the
process's session (``session``), its JVM log going to the workspace's ``logs/``. Spark failures
leave it as odfd's errors only (``failures``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from protocol.model import SqlQueryStep
from verifier.engine.contract import (
    IngestRequest,
    IngestResult,
    QueryTable,
    TransformRequest,
    TransformResult,
    step_name,
)
from verifier.engine.errors import InvalidQueryError
from verifier.engine.spark import session
from verifier.engine.spark.choice import LOG_DIR, SPARK_LOG, choose_engine
from verifier.engine.spark.collect import ordered_batches
from verifier.engine.spark.columns import quote
from verifier.engine.spark.failures import engine_failures, spark_failures
from verifier.engine.spark.ingest import run_ingest
from verifier.engine.spark.internals import from_arrow_schema
from verifier.engine.spark.settings import SparkSettings
from verifier.engine.spark.transform import ENGINE_NAME, execute_transform


class SparkEngine:
    name = ENGINE_NAME
    sql_dialect = "spark"

    def __init__(self, settings: SparkSettings, *, workspace_root: Path | None = None) -> None:
        """``workspace_root``: where the daemon records its Connect server and Spark's JVM log
        goes (``None``: settings as given, errors only on stderr)."""
        self._settings = settings
        self._root = workspace_root
        self._configured = False
        self._lock = threading.Lock()

    def quote_identifier(self, name: str) -> str:
        return quote(name)

    def run_transform(self, request: TransformRequest) -> TransformResult:
        self._configure()
        with engine_failures():
            return execute_transform(request)

    def query(self, steps: Sequence[SqlQueryStep], tables: Sequence[QueryTable]) -> pa.Table:
        """Spark SQL over the tables (named with backticks, e.g. ```alice/2pub```)."""
        self._configure()
        with engine_failures():
            return _query(steps, tables)

    def ingest(self, request: IngestRequest) -> IngestResult | None:
        self._configure()
        with engine_failures():
            return run_ingest(
                request, preprocess_in_session=isinstance(request.preprocess_engine, SparkEngine)
            )

    def start(self) -> None:
        self._configure()
        with engine_failures():
            session.get_spark()

    @property
    def running(self) -> bool:
        return session.is_running()

    def stop(self) -> None:
        session.stop()

    def _configure(self) -> None:
        """Chooses where Spark runs and hands the process's session its settings, once."""
        with self._lock:
            if self._configured:
                return
            choice = choose_engine(self._root, self._settings)
            log_path = None if self._root is None else self._root / LOG_DIR / SPARK_LOG
            session.configure(choice.settings, log_path=log_path)
            self._configured = True


def _query(steps: Sequence[SqlQueryStep], tables: Sequence[QueryTable]) -> pa.Table:
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql.types import StructType

    spark = session.isolated_session()
    for table in tables:
        if table.paths:
            df = spark.read.option("mergeSchema", "true").parquet(*map(str, table.paths))
        elif table.schema is not None:
            df = spark.createDataFrame([], from_arrow_schema(table.schema))
        else:  # no data yet: a table without columns or rows, as the reference answers
            df = spark.createDataFrame([], StructType([]))
        df.createOrReplaceTempView(quote(table.name))
    with spark_failures("the query"):
        result = None
        for number, step in enumerate(steps, start=1):
            try:
                result = spark.sql(step.query)
            except (AnalysisException, ParseException) as err:
                raise InvalidQueryError(
                    f"{step_name(steps, number)} is invalid: {_first_line(err)}"
                ) from err
            if step.alias:
                result.createOrReplaceTempView(quote(step.alias))
        assert result is not None, "a query has at least one step"
        with ordered_batches(result) as (schema, batches):
            return pa.Table.from_batches(list(batches), schema)


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
