"""One ingest transaction's Spark work: read, preprocess, merge, order, write the slice.

The file is read with the declared schema (``read``), reshaped by the preprocess query or, with
neither a preprocess step nor a declared schema, by the reference's default renaming
(``preprocess``), merged with the dataset's history under its merge strategy and ordered
(``records``, ``merge``), then written as the slice (``output``). A malformed record is named by
file, row and column (``bad_rows``); a null where the schema requires a value, by column (or
struct field, list item). Spark reads every nested field as nullable; the slice gets the
nullability inside columns from the dataset's schema, else from the read schema or the
preprocess step's engine, as the reference writes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verifier.engine.contract import IngestRequest, IngestResult
from verifier.engine.errors import BadInputError, IngestError
from verifier.engine.output import NullValuesError
from verifier.engine.spark import bad_rows
from verifier.engine.spark.cancel import jobs_of_task
from verifier.engine.spark.failures import describe, spark_error_types
from verifier.engine.spark.output import write_slice
from verifier.engine.spark.preprocess import preprocess, preprocess_default
from verifier.engine.spark.read import reader_for
from verifier.engine.spark.records import new_records
from verifier.engine.spark.schema import declared_nesting_schema, declared_required
from verifier.engine.spark.session import isolated_session

if TYPE_CHECKING:  # Spark is imported when work starts
    from pyspark.sql import SparkSession


def run_ingest(request: IngestRequest, *, preprocess_in_session: bool) -> IngestResult | None:
    """The request's slice (``None`` for an empty file whose columns nothing declares); the
    preprocess query runs in this Spark session with ``preprocess_in_session``, else in the
    request's preprocess engine. Blocking. Inside ``cancellable_jobs`` its Spark work is
    interrupted when the task that started it is cancelled (a client's Ctrl-C)."""
    spark = isolated_session()
    with jobs_of_task(spark):
        return _ingest(request, spark, preprocess_in_session)


def _ingest(
    request: IngestRequest, spark: SparkSession, preprocess_in_session: bool
) -> IngestResult | None:
    source = request.input.source
    reader = reader_for(request.read, spark)
    infer = _inferred(request.read) and request.preprocess is None
    declared = declared_required(request.read, spark)
    required = declared
    nesting = declared_nesting_schema(request.read)
    if request.preprocess is not None and not preprocess_in_session:
        spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        data = reader.read(spark, request.input)
        if data is None:
            return None
        if request.preprocess is not None:
            engine = None if preprocess_in_session else request.preprocess_engine
            data, required, nesting = preprocess(
                spark,
                request.preprocess,
                engine,
                data,
                declared,
                request.dataset_alias,
                request.work,
                nesting,
            )
        elif infer:
            data = preprocess_default(data, request.merge, request.vocab)
        prev = (
            spark.read.option("mergeSchema", "true").parquet(*map(str, request.history))
            if request.history
            else None
        )
        records = new_records(
            data,
            prev=prev,
            merge_strategy=request.merge,
            vocab=request.vocab,
            source_event_time=request.source_event_time,
            infer_event_time=infer,
        )
        schema, written = write_slice(
            records.df,
            merge_keys=records.merge_keys,
            vocab=request.vocab,
            start_offset=request.start_offset,
            system_time=request.system_time,
            out_path=request.out_path,
            spill_dir=str(request.work),
            required=_required_columns(request, required),
            declared=request.dataset_schema if request.dataset_schema is not None else nesting,
        )
        return IngestResult(schema, written)
    except NullValuesError as err:
        raise BadInputError(
            f"{request.dataset_alias}: {source}: {err}", path=str(source), column=err.column
        ) from None
    except spark_error_types() as err:
        if bad_rows.looks_like_bad_input(err):
            diagnosis = reader.diagnose(spark, request.input)
            if diagnosis is not None:
                raise diagnosis from None
        raise IngestError(
            f"{request.dataset_alias}: ingesting {source} failed: {describe(err)}"
        ) from err


def _inferred(read_step: object) -> bool:
    """Whether the read step leaves the columns' types to be inferred (no schema declared)."""
    return getattr(read_step, "schema", None) is None and not getattr(read_step, "ddl_schema", None)


def _required_columns(request: IngestRequest, result_required: frozenset[str]) -> frozenset[str]:
    """Data columns a new slice must not hold nulls in, decided as the reference does.

    Once the dataset has a schema, its columns keep their nullability (the reference coerces the
    new data to it and never rewrites the schema). Before that: the event-time column (always
    filled) and ``result_required``: what the read schema declares required, or after a
    preprocess step what that step's engine proves (nothing, for Spark).
    """
    if request.dataset_schema is not None:
        return frozenset(f.name for f in request.dataset_schema if not f.nullable)
    return result_required | {request.vocab.event_time}
