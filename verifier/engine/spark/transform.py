"""Executes one transaction of a derivative dataset's SQL transform in Spark.

The coordinator plans a transaction (which input slices, which offsets, what system time) and the
verifier replays recorded ones; both hand a :class:`TransformRequest` to :func:`execute_transform`.
Given the same request it always produces the same records in the same order, hence the same
logical hash:

* each input is its slice files, oldest first, each cut into partitions of at most
  :data:`INPUT_SPLIT_BYTES` at Parquet row-group boundaries, and the partitions are concatenated
  in offset order, so map/filter steps keep the input order (RFC-015) while running in parallel.
  An input whose files fit in one split is read as a single partition (no shuffle is needed to
  group or order it, as in the reference Spark engine). Both depend on the files alone, never on
  how many cores or executors there are;
* odfd's shuffle manager makes every reduce task read map outputs in map order, so aggregations
  and joins see their input in the same order on one machine or on a cluster (see
  ``verifier.engine.spark.settings``, which also fixes shuffle partitioning and SQL semantics), and
  queries using random or clock functions are rejected;
* output rows get offsets in the order they are collected (partition by partition), and the
  system time is the request's, not the clock's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.identity import DatasetId
from protocol.model import Timestamp, TransformSql
from verifier.engine.columns import Vocab
from verifier.engine.contract import (
    TransformInputSlice,
    TransformRequest,
    TransformResult,
    query_steps,
    validate_transform,
)
from verifier.engine.errors import InvalidQueryError, TransformError
from verifier.engine.output import required_columns
from verifier.engine.spark.cancel import jobs_of_task
from verifier.engine.spark.columns import col, quote
from verifier.engine.spark.determinism import check_deterministic
from verifier.engine.spark.failures import describe, spark_failures
from verifier.engine.spark.internals import from_arrow_schema, to_arrow_schema
from verifier.engine.spark.output import write_slice
from verifier.engine.spark.session import isolated_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

ENGINE_NAME = "spark"
#: The keys of a Spark schema's JSON form that say whether a value may be null.
_NULLABILITY_KEYS = frozenset({"nullable", "containsNull", "valueContainsNull"})
_OUTPUT_VIEW = "__output__"

#: Largest input partition. Part of the engine's contract: changing it changes how aggregations
#: split their work, hence the last bits of floating-point results of existing transforms.
INPUT_SPLIT_BYTES = 32 * 1024 * 1024

#: Split input files by their size alone (Spark would otherwise split finer on machines with more
#: cores, see ``FilePartition.maxSplitBytes``).
_INPUT_READ_CONF = {
    "spark.sql.files.maxPartitionBytes": str(INPUT_SPLIT_BYTES),
    "spark.sql.files.minPartitionNum": "1",
}


def execute_transform(request: TransformRequest) -> TransformResult:
    """Runs the transaction and writes its slice and checkpoint under ``request.out_dir``."""
    transform = validate_transform(request.transform, request.dataset_alias, engine=ENGINE_NAME)
    spark = transform_session()
    with jobs_of_task(spark), spark_failures(f"{request.dataset_alias}: the transform"):
        for input_slice in request.inputs:
            input_frame(spark, input_slice, request.dataset_alias).createTempView(
                quote(input_slice.alias)
            )
        result = run_queries(spark, transform, request.dataset_alias, require_deterministic=True)
        result = _prepare_output(result, request.vocab, request.dataset_alias)
        required = required_columns(to_arrow_schema(result.schema), request.dataset_schema)
        schema, written = write_slice(
            result,
            vocab=request.vocab,
            start_offset=request.next_offset,
            system_time=request.system_time,
            out_path=request.out_dir / "data.parquet",
            spill_dir=request.spill_dir,
            required=required,
            op_required=request.vocab.op in required,
            declared=request.dataset_schema,
        )
    watermarks = _input_watermarks(request)
    # Spark's checkpoints are imported here: a DataFusion pull never loads them.
    from verifier.engine.spark.checkpoint import write_checkpoint

    checkpoint = (
        write_checkpoint(watermarks, request.out_dir / "checkpoint.tar") if watermarks else None
    )
    return TransformResult(schema, written, _output_watermark(request, watermarks), checkpoint)


def transform_session() -> SparkSession:
    """An isolated session that splits input files as the engine's contract says."""
    spark = isolated_session()
    for key, value in _INPUT_READ_CONF.items():
        spark.conf.set(key, value)
    return spark


def input_frame(spark: SparkSession, input_slice: TransformInputSlice, dataset: str) -> DataFrame:
    """The input's records in the interval, in offset order, in the input's current schema.

    Every column reads as nullable, as Spark's Parquet reader reads any file and as the
    reference's engine reads its inputs: what a query selects from an input is optional in
    the result whether or not the input has records. Slices written before columns were added
    lack them: they read as nulls.
    """
    from pyspark.sql import functions as F

    if input_slice.schema is None:
        raise TransformError(f"{dataset}: input '{input_slice.alias}' has no data schema yet")
    schema = _as_nullable(from_arrow_schema(input_slice.schema))
    if input_slice.offset_interval is None or not input_slice.data_paths:
        return spark.createDataFrame([], schema)
    frames = []
    for path in input_slice.data_paths:
        frame = spark.read.parquet(str(path))
        frames.append(
            frame.select(
                *[
                    col(f.name)
                    if f.name in frame.columns
                    else F.lit(None).cast(f.dataType).alias(f.name)
                    for f in schema.fields
                ]
            )
        )
    df = frames[0]
    for frame in frames[1:]:
        df = df.union(frame)
    start, end = input_slice.offset_interval
    offset = col(input_slice.vocab.offset)
    df = df.where((offset >= start) & (offset <= end))
    if sum(path.stat().st_size for path in input_slice.data_paths) <= INPUT_SPLIT_BYTES:
        return df.coalesce(1)
    return df


def _as_nullable(schema: StructType) -> StructType:
    """``schema`` with every field, element and value nullable, at every depth (Spark's own
    ``StructType.asNullable``, which PySpark lacks)."""
    from pyspark.sql.types import StructType

    def loosen(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: True if key in _NULLABILITY_KEYS else loosen(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [loosen(item) for item in value]
        return value

    return StructType.fromJson(loosen(schema.jsonValue()))


def run_queries(
    spark: SparkSession, transform: TransformSql, what: str, *, require_deterministic: bool
) -> DataFrame:
    """Runs the query steps, each named step becoming a view; returns the unnamed last one."""
    from pyspark.errors import AnalysisException, ParseException

    steps = query_steps(transform)
    for number, step in enumerate(steps, start=1):
        where = f"{what}: query step {number}" + (f" ({step.alias})" if step.alias else "")
        try:
            df = spark.sql(step.query)
        except (AnalysisException, ParseException) as err:
            raise InvalidQueryError(f"{where} is invalid: {describe(err)}") from err
        if require_deterministic:
            check_deterministic(df, where)
        df.createOrReplaceTempView(quote(step.alias or _OUTPUT_VIEW))
    return spark.table(quote(_OUTPUT_VIEW))


def _prepare_output(result: DataFrame, vocab: Vocab, dataset: str) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, IntegerType, TimestampNTZType, TimestampType

    names = result.columns
    for system in (vocab.offset, vocab.system_time):
        if system in names:
            raise TransformError(
                f"{dataset}: the query's result has a column '{system}' that clashes with a system "
                "column; rename it or set a different vocabulary"
            )
    if vocab.event_time not in names:
        raise TransformError(
            f"{dataset}: the query's result has no event time column '{vocab.event_time}'"
        )
    event_type = result.schema[vocab.event_time].dataType
    if not isinstance(event_type, (TimestampType, TimestampNTZType, DateType)):
        raise TransformError(
            f"{dataset}: event time column '{vocab.event_time}' must be a TIMESTAMP or DATE, "
            f"found {event_type.simpleString()}"
        )
    if vocab.op in names:
        if not isinstance(result.schema[vocab.op].dataType, IntegerType):
            raise TransformError(
                f"{dataset}: operation type column '{vocab.op}' must be INT, "
                f"found {result.schema[vocab.op].dataType.simpleString()}"
            )
        return result.select(col(vocab.op), *[col(c) for c in names if c != vocab.op])
    return result.select(F.lit(0).cast("int").alias(vocab.op), *[col(c) for c in names])


def _input_watermarks(request: TransformRequest) -> dict[DatasetId, Timestamp]:
    """Each input's watermark: the latest one it declared in this interval, else the checkpoint's."""
    from verifier.engine.spark.checkpoint import read_checkpoint

    previous = read_checkpoint(request.prev_checkpoint) if request.prev_checkpoint else {}
    watermarks: dict[DatasetId, Timestamp] = {}
    for input_slice in request.inputs:
        declared = [w.event_time for w in input_slice.explicit_watermarks]
        if declared:
            watermarks[input_slice.dataset_id] = max(declared)
        elif input_slice.dataset_id in previous:
            watermarks[input_slice.dataset_id] = previous[input_slice.dataset_id]
    return watermarks


def _output_watermark(
    request: TransformRequest, watermarks: dict[DatasetId, Timestamp]
) -> Timestamp | None:
    """The slowest input's watermark, once every input has one; never moves backwards."""
    candidate = None
    if request.inputs and all(i.dataset_id in watermarks for i in request.inputs):
        candidate = min(watermarks[i.dataset_id] for i in request.inputs)
    if request.prev_watermark is not None and (
        candidate is None or candidate < request.prev_watermark
    ):
        return request.prev_watermark
    return candidate
