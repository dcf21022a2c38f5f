"""The Spark engine behind :class:`verifier.engine.base.Engine`: a thin adapter over the Spark
modules of this package (``transform``, ``session``, ``collect``), which stay where they are."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from protocol.model import SqlQueryStep
from verifier.engine.base import QueryTable, step_name
from verifier.engine.collect import ordered_batches
from verifier.engine.columns import quote
from verifier.engine.failures import spark_failures
from verifier.engine.session import isolated_session
from verifier.engine.transform import (
    InvalidQueryError,
    TransformRequest,
    TransformResult,
    execute_transform,
)


class SparkEngine:
    name = "spark"

    def run_transform(self, request: TransformRequest) -> TransformResult:
        return execute_transform(request)

    def query(self, steps: Sequence[SqlQueryStep], tables: Sequence[QueryTable]) -> pa.Table:
        """Spark SQL over the tables (named with backticks, e.g. ```alice/2pub```)."""
        from pyspark.errors import AnalysisException, ParseException
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import StructType

        spark = isolated_session()
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
