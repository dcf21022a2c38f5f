"""Preprocess step: reshape freshly read data with Spark SQL before it is merged.

The read data is visible to the query as the view ``input`` (as in the reference's manifests);
multi-step ``queries`` work as in transforms. Unlike a transform, a preprocess query may read the
clock (e.g. to stamp an ingestion time): root data is not re-derived by verifiers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verifier.engine.transform import run_queries, validate_transform

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

INPUT_VIEW = "input"


def preprocess(spark: SparkSession, transform: object, data: DataFrame, dataset: str) -> DataFrame:
    sql = validate_transform(transform, f"{dataset}: preprocess")
    data.createOrReplaceTempView(INPUT_VIEW)
    return run_queries(spark, sql, f"{dataset}: preprocess", require_deterministic=False)
