"""Preprocess step: reshape freshly read data with SQL before it is merged.

The read data is visible to the query as the table ``input`` (as in the reference's manifests);
multi-step ``queries`` work as in transforms. Unlike a transform, a preprocess query may read the
clock (e.g. to stamp an ingestion time): root data is not re-derived by verifiers.

A preprocess step naming Spark runs in the ingest's Spark session. Any other engine odfd has
(DataFusion) runs its raw query (``Engine.query``) on the read data written to a Parquet file, in
order, and its result is read back into Spark for the merge step (in a case-sensitive session,
as DataFusion's identifiers are: ``MIXed`` and ``mixed`` are two columns). Without a preprocess
step and without a declared schema, :func:`preprocess_default` renames columns that clash with
system columns, as the reference's default preprocessing does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from protocol.errors import OdfError
from protocol.model import MergeStrategyChangelogStream, MergeStrategyUpsertStream, TransformSql
from verifier.engine.columns import Vocab
from verifier.engine.contract import Engine, QueryTable, query_steps
from verifier.engine.output import check_nested_nulls, declared_nesting
from verifier.engine.spark.collect import ordered_batches
from verifier.engine.spark.columns import col
from verifier.engine.spark.transform import run_queries

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

INPUT_VIEW = "input"


def preprocess(
    spark: SparkSession,
    sql: TransformSql,
    engine: Engine | None,
    data: DataFrame,
    declared_required: frozenset[str],
    dataset: str,
    work: Path,
    nesting: pa.Schema | None = None,
) -> tuple[DataFrame, frozenset[str], pa.Schema | None]:
    """``data`` reshaped by the preprocess query ``sql``: in ``spark`` itself (``engine``
    ``None``), else in ``engine``; ``work`` holds intermediate files. Also the result's columns
    that are required, as the reference decides, and the schema whose nested nullability the
    slice keeps: from Spark none and ``None`` (its engine reads the input as all-nullable);
    from another engine, what its plan proves non-null over the input's ``declared_required``
    columns and the nested nullability of ``nesting`` (the read schema), and its result's
    schema."""
    what = f"{dataset}: preprocess"
    if engine is None:
        data.createOrReplaceTempView(INPUT_VIEW)
        return run_queries(spark, sql, what, require_deterministic=False), frozenset(), None
    read_path = work / "preprocess-input.parquet"
    with ordered_batches(data, spill_dir=str(work)) as (schema, batches):
        schema = _nested_as_declared(schema, nesting)
        with pq.ParquetWriter(str(read_path), schema) as writer:
            for batch in batches:
                writer.write_batch(_cast_nested(batch, schema))
    declared = pa.schema([f.with_nullable(f.name not in declared_required) for f in schema])
    try:
        result = engine.query(query_steps(sql), [QueryTable(INPUT_VIEW, (read_path,), declared)])
    except OdfError as err:
        raise type(err)(f"{what}: {err}") from err
    result_path = work / "preprocess-output.parquet"
    pq.write_table(_utc_timestamps(result), str(result_path))
    required = frozenset(f.name for f in result.schema if not f.nullable)
    return spark.read.parquet(str(result_path)), required, result.schema


def _nested_as_declared(schema: pa.Schema, nesting: pa.Schema | None) -> pa.Schema:
    """``schema`` (Spark's, nullable at every depth) with the read schema's nullability inside
    its columns: DataFusion reads a file only as the nullability it was written with."""
    if nesting is None:
        return schema
    return pa.schema(
        [
            f.with_type(declared_nesting(f.type, nesting.field(f.name).type))
            if nesting.get_field_index(f.name) >= 0
            else f
            for f in schema
        ]
    )


def _cast_nested(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s nested nullability; a null where it requires a value is a
    :class:`~verifier.engine.output.NullValuesError` naming the field."""
    if batch.schema == schema:
        return batch
    columns = []
    for column, target in zip(batch.columns, schema, strict=True):
        if column.type != target.type:
            check_nested_nulls(column, target.type, target.name)
            column = column.cast(target.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _utc_timestamps(table: pa.Table) -> pa.Table:
    """Timestamps without a time zone read back into Spark as local times; they are UTC."""
    for index, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type) and field.type.tz is None:
            utc = pa.timestamp(field.type.unit, tz="UTC")
            table = table.set_column(index, field.with_type(utc), table.column(index).cast(utc))
    return table


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
