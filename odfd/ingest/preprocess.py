"""Preprocess step: reshape freshly read data with Spark SQL before it is merged.

The read data is visible to the query as the view ``input`` (as in the reference's manifests);
multi-step ``queries`` work as in transforms. Unlike a transform, a preprocess query may read the
clock (e.g. to stamp an ingestion time): root data is not re-derived by verifiers.
Without a preprocess step and without a declared schema, :func:`preprocess_default` renames
columns that clash with system columns, as the reference's default preprocessing does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.model import MergeStrategyChangelogStream, MergeStrategyUpsertStream
from verifier.engine.columns import Vocab, col
from verifier.engine.transform import run_queries, validate_transform

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

INPUT_VIEW = "input"


def preprocess(spark: SparkSession, transform: object, data: DataFrame, dataset: str) -> DataFrame:
    sql = validate_transform(transform, f"{dataset}: preprocess")
    data.createOrReplaceTempView(INPUT_VIEW)
    return run_queries(spark, sql, f"{dataset}: preprocess", require_deterministic=False)


def preprocess_default(data: DataFrame, merge_strategy: object, vocab: Vocab) -> DataFrame:
    """What the reference does to inferred data when a source has no preprocess step.

    A column named like a system column (``offset``, ``system_time``, and ``op`` unless the merge
    strategy reads it: ChangelogStream, UpsertStream) is renamed with a leading ``_`` instead of
    failing the ingest.
    """
    reserved = {vocab.offset, vocab.system_time}
    if not isinstance(merge_strategy, (MergeStrategyChangelogStream, MergeStrategyUpsertStream)):
        reserved.add(vocab.op)
    if not reserved & set(data.columns):
        return data
    return data.select(*[col(c).alias(f"_{c}") if c in reserved else col(c) for c in data.columns])
