"""The DataFusion engine: transforms and queries in-process on Arrow, no JVM.

It follows the ODF engine contract as the reference DataFusion engine implements it:

* each input is registered under its query alias (by default the dataset reference, so a query
  reads ``"alice/2pub"``), holding only the records of the transaction's offset interval, in
  offset order (its slice files are read one after the other, oldest first);
* each named query step becomes a view, the unnamed last one is the result;
* the result must not carry ``offset`` or ``system_time`` and must have an event-time column of a
  date or timestamp type; it is then written by the same code as every engine's results
  (:func:`verifier.engine.output.write_batches`): offsets from the next offset in result order,
  ``op`` (0 unless the query sets it) and ``system_time`` added, timestamps as milliseconds in UTC,
  columns ``offset, op, system_time, event_time``, then the rest;
* a column, struct field or list item is REQUIRED where the optimized plan proves it non-null
  (as the reference writes it), unless the dataset's schema already declares it (then it keeps
  what the schema declares, at every depth);
* the output watermark is the lowest of the inputs' latest declared watermarks; like the
  reference, the engine keeps no checkpoint;
* the reference's JSON functions (``json_get_str``, ``->``, ...) are there
  (:mod:`verifier.engine.datafusion.json_functions`).

Determinism (the verifier re-executes transactions and compares logical hashes): one target
partition, no repartitioning, a fixed batch size and time zone, plain (not view) string types,
case-sensitive identifiers as in the reference. A plan whose result has several partitions (a
top-level ``UNION ALL``) is read partition by partition, in order. Plans that merge partitions in
arrival order inside the query (a ``UNION ALL`` feeding an aggregation or join) and queries using
random or clock values are rejected, since no second run could be relied on to reproduce them.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from protocol.model import SqlQueryStep, Timestamp
from verifier.engine.contract import (
    QueryTable,
    TransformRequest,
    TransformResult,
    query_steps,
    step_name,
    validate_transform,
)
from verifier.engine.datafusion import json_functions
from verifier.engine.errors import (
    InvalidQueryError,
    NonDeterministicQueryError,
    QueryExecutionError,
    TransformError,
)
from verifier.engine.output import required_columns, write_batches

if TYPE_CHECKING:
    from datafusion import DataFrame, SessionContext, SQLOptions

ENGINE_NAME = "datafusion"

#: Session settings that make a run reproducible (and match the reference's SQL dialect).
SETTINGS = {
    "datafusion.execution.target_partitions": "1",
    "datafusion.execution.batch_size": "8192",
    "datafusion.execution.time_zone": "UTC",
    "datafusion.optimizer.repartition_file_scans": "false",
    "datafusion.optimizer.repartition_joins": "false",
    "datafusion.optimizer.repartition_aggregations": "false",
    "datafusion.optimizer.repartition_windows": "false",
    "datafusion.optimizer.repartition_sorts": "false",
    "datafusion.optimizer.enable_round_robin_repartition": "false",
    "datafusion.sql_parser.enable_ident_normalization": "false",
    "datafusion.sql_parser.map_string_types_to_utf8view": "false",
    "datafusion.execution.parquet.schema_force_view_types": "false",
}

_VOLATILE = re.compile(
    r"\b(random|uuid|now|current_date|current_time|current_timestamp|localtime|localtimestamp)\("
)
_MERGING_OPERATORS = ("CoalescePartitionsExec", "RepartitionExec")
_EVENT_TIME_TYPES = (pa.types.is_timestamp, pa.types.is_date)
_OP_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32())


class DataFusionEngine:
    name = ENGINE_NAME
    sql_dialect = "datafusion"
    running = False
    """It runs inside each call: nothing outlives one."""

    def quote_identifier(self, name: str) -> str:
        return quote_identifier(name)

    def start(self) -> None:
        """Nothing to start: a session is made per call."""

    def stop(self) -> None:
        """Nothing to stop."""

    def run_transform(self, request: TransformRequest) -> TransformResult:
        what = request.dataset_alias
        transform = validate_transform(request.transform, what, engine=ENGINE_NAME)
        ctx = new_context()
        scratch = request.out_dir / "datafusion-inputs"
        for number, input_slice in enumerate(request.inputs):
            if input_slice.schema is None:
                raise TransformError(f"{what}: input '{input_slice.alias}' has no data schema yet")
            _register_files(
                ctx,
                input_slice.alias,
                input_slice.data_paths if input_slice.offset_interval else (),
                input_slice.schema,
                scratch / str(number),
                what=what,
                where=(input_slice.vocab.offset, input_slice.offset_interval),
            )
        result = _run_steps(ctx, query_steps(transform), what, deterministic=True)
        columns = _validate_result(result.schema(), request, what)
        planned = optimized_schema(ctx, result, what)
        result_schema = pa.schema([planned.field(name) for name in columns])
        required = required_columns(result_schema, request.dataset_schema)
        schema, written = write_batches(
            result_schema,
            _batches(result, planned, columns, f"{what}: the transform"),
            vocab=request.vocab,
            start_offset=request.next_offset,
            system_time=request.system_time,
            out_path=request.out_dir / "data.parquet",
            required=required,
            op_required=request.vocab.op not in columns or request.vocab.op in required,
            declared=request.dataset_schema,
        )
        return TransformResult(schema, written, output_watermark(request), None)

    def query(self, steps: Sequence[SqlQueryStep], tables: Sequence[QueryTable]) -> pa.Table:
        """DataFusion SQL over the tables (quoted names, e.g. ``"alice/2pub"``)."""
        ctx = new_context()
        with tempfile.TemporaryDirectory(prefix="odfd-datafusion-") as scratch:
            for number, table in enumerate(tables):
                _register_files(
                    ctx, table.name, table.paths, table.schema, Path(scratch) / str(number)
                )
            result = _run_steps(ctx, steps, "", deterministic=False)
            planned = optimized_schema(ctx, result, "")
            batches = list(_batches(result, planned, planned.names, "the query"))
        return pa.Table.from_batches(batches, _plain_schema(planned))


def new_context(overrides: dict[str, str] | None = None) -> SessionContext:
    """A session with :data:`SETTINGS` (and ``overrides`` of those that do not decide what a
    query answers), tables in catalog ``odf`` schema ``odf`` as the reference's."""
    from datafusion import SessionConfig, SessionContext

    config = SessionConfig().with_information_schema(True)
    config = config.with_default_catalog_and_schema("odf", "odf")
    for key, value in {**SETTINGS, **(overrides or {})}.items():
        config = config.set(key, value)
    return SessionContext(config)


def quote_identifier(name: str) -> str:
    """A table or column name as a DataFusion SQL identifier (kept exactly, dots and slashes
    included)."""
    return '"' + name.replace('"', '""') + '"'


def output_watermark(request: TransformRequest) -> Timestamp | None:
    """The lowest of the latest watermarks the inputs declared in this transaction (inputs that
    declared none do not hold it back, as in the reference); never below the previous one."""
    latest = [
        max(w.event_time for w in i.explicit_watermarks)
        for i in request.inputs
        if i.explicit_watermarks
    ]
    candidate = min(latest) if latest else None
    previous = request.prev_watermark
    if previous is not None and (candidate is None or candidate < previous):
        return previous
    return candidate


def _register_files(
    ctx: SessionContext,
    name: str,
    paths: Sequence[Path],
    schema: pa.Schema | None,
    folder: Path,
    *,
    what: str = "",
    where: tuple[str, tuple[int, int] | None] | None = None,
) -> None:
    """Registers ``paths`` (read in the given order) as view ``name``, or an empty table.

    DataFusion reads a folder's files sorted by name; links named by position keep the order.
    ``where`` restricts the rows to an offset interval (``None`` interval: no rows).
    """
    try:
        _create_view(ctx, name, paths, schema, folder, where)
    except Exception as err:  # DataFusion's errors share no type
        prefix = f"{what}: input" if what else "table"
        raise TransformError(f"{prefix} '{name}' cannot be read: {_first_line(err)}") from err


def _create_view(
    ctx: SessionContext,
    name: str,
    paths: Sequence[Path],
    schema: pa.Schema | None,
    folder: Path,
    where: tuple[str, tuple[int, int] | None] | None,
) -> None:
    hidden = _hidden_name()
    if paths:
        folder.mkdir(parents=True, exist_ok=True)
        for position, path in enumerate(paths):
            (folder / f"{position:08d}.parquet").symlink_to(path.resolve())
        ctx.register_view(hidden, ctx.read_parquet(str(folder), schema=schema))
    else:  # no data yet: no rows, and no columns without a schema, as the reference answers
        empty = (schema if schema is not None else pa.schema([])).empty_table()
        ctx.register_view(hidden, ctx.from_arrow(empty))
    condition = ""
    if where is not None:
        offset, interval = where
        condition = (
            " WHERE false"
            if interval is None or not paths
            else f" WHERE {quote_identifier(offset)} BETWEEN {interval[0]} AND {interval[1]}"
        )
    ctx.sql(f"CREATE VIEW {quote_identifier(name)} AS SELECT * FROM {hidden}{condition}")


def _run_steps(
    ctx: SessionContext, steps: Sequence[SqlQueryStep], what: str, *, deterministic: bool
) -> DataFrame:
    """Plans each step (named ones become views); the last step's DataFrame."""
    from datafusion import SQLOptions

    if not steps:
        raise TransformError(f"{what}: the transform has no query")
    queries_only = (
        SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)
    )
    prefix = f"{what}: " if what else ""
    result = None
    for number, step in enumerate(steps, start=1):
        where = prefix + step_name(steps, number)
        result = _plan(ctx, step.query, queries_only, where)
        if deterministic:
            _check_deterministic(result, where)
        if step.alias:
            hidden = _hidden_name()
            ctx.register_view(hidden, result)
            ctx.sql(f"CREATE VIEW {quote_identifier(step.alias)} AS SELECT * FROM {hidden}")
    assert result is not None
    return result


def optimized_schema(ctx: SessionContext, df: DataFrame, what: str) -> pa.Schema:
    """The result's schema as the optimized plan (which the reference writes, and which runs)
    gives it: it may prove more columns non-null than the query as written (a UDF over
    literals folds into a literal)."""
    return optimized_frame(ctx, df, what).schema()


def optimized_frame(ctx: SessionContext, df: DataFrame, what: str) -> DataFrame:
    """``df`` over its optimized plan: what runs, and (executed again and again) a cheaper
    start than the plan as written, whose views and aliases each execution optimizes away anew."""
    try:
        return ctx.create_dataframe_from_logical_plan(df.optimized_logical_plan())
    except Exception as err:  # DataFusion's errors share no type
        prefix = f"{what}: " if what else ""
        raise InvalidQueryError(f"{prefix}the query cannot be planned: {_first_line(err)}") from err


def _plan(ctx: SessionContext, query: str, options: SQLOptions, where: str) -> DataFrame:
    """The step's plan, with the JSON functions it calls registered: the first of the rewritten
    candidates (:func:`json_functions.rewrite`) that plans; else the last one's error."""
    failure: Exception | None = None
    for text, json_calls in json_functions.rewrite(query):
        json_functions.register(ctx, json_calls)
        try:
            return ctx.sql_with_options(text, options)
        except Exception as err:  # noqa: BLE001  # DataFusion planning errors share no type
            failure = err
    assert failure is not None
    raise InvalidQueryError(f"{where} is invalid: {_first_line(failure)}") from failure


def _hidden_name() -> str:
    """A table name no query uses; views get their (quoted) names through ``CREATE VIEW``, since
    registering a name directly would read dots in it as catalog and schema separators."""
    return f"__odf_{uuid.uuid4().hex}"


def _check_deterministic(df: DataFrame, where: str) -> None:
    found = _VOLATILE.search(df.logical_plan().display_indent())
    if found:
        raise NonDeterministicQueryError(
            f"{where} is not deterministic: it calls {found.group(1)}(), whose value differs "
            "between runs, so no one could reproduce the result"
        )
    plan = df.execution_plan()
    pending = list(plan.children())
    while pending:
        node = pending.pop()
        operator = node.display().split(":", 1)[0].strip()
        if operator in _MERGING_OPERATORS:
            raise NonDeterministicQueryError(
                f"{where} is not deterministic in DataFusion: it merges several streams in "
                "arrival order before combining them (e.g. a UNION ALL feeding an aggregation "
                "or join); compute the UNION ALL in its own dataset and aggregate that"
            )
        pending.extend(node.children())


def _validate_result(schema: pa.Schema, request: TransformRequest, what: str) -> list[str]:
    """Checks the result as the reference does (a bad result is an invalid query, as there);
    its columns in slice order (event time first)."""
    vocab = request.vocab
    names = schema.names
    for system in (vocab.offset, vocab.system_time):
        if system in names:
            raise InvalidQueryError(
                f"{what}: the query's result has a column '{system}' that clashes with a system "
                "column; rename it or set a different vocabulary"
            )
    if vocab.event_time not in names:
        raise InvalidQueryError(
            f"{what}: the query's result has no event time column '{vocab.event_time}' "
            f"(it has {', '.join(names)})"
        )
    event_type = schema.field(vocab.event_time).type
    if not any(test(event_type) for test in _EVENT_TIME_TYPES):
        raise InvalidQueryError(
            f"{what}: event time column '{vocab.event_time}' must be a timestamp or a date, "
            f"found {event_type}"
        )
    if vocab.op in names and schema.field(vocab.op).type not in _OP_TYPES:
        raise InvalidQueryError(
            f"{what}: operation type column '{vocab.op}' must be int32 (or a narrower integer "
            f"type, which is widened), found {schema.field(vocab.op).type}"
        )
    rest = [n for n in names if n not in (vocab.op, vocab.event_time)]
    return [*([vocab.op] if vocab.op in names else []), vocab.event_time, *rest]


def _batches(
    df: DataFrame, schema: pa.Schema, columns: Sequence[str], what: str
) -> Iterator[pa.RecordBatch]:
    """The result's batches, partition after partition, columns in the given order, with the
    result's ``schema`` (:func:`optimized_schema`)."""
    plain = _plain_schema(pa.schema([schema.field(name) for name in columns]))
    try:
        streams = df.execute_stream_partitioned()
    except Exception as err:  # nor do its execution errors
        raise QueryExecutionError(f"{what} failed: {_first_line(err)}") from err
    for stream in streams:
        iterator: Iterator[Any] = iter(stream)
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            except Exception as err:
                raise QueryExecutionError(f"{what} failed: {_first_line(err)}") from err
            arrow = batch.to_pyarrow()
            yield pa.RecordBatch.from_arrays(
                [_plain(arrow.column(name), plain.field(name).type) for name in columns],
                schema=plain,
            )


def _plain_schema(schema: pa.Schema) -> pa.Schema:
    """View string/binary types as their plain forms, which the ODF schema knows."""
    return pa.schema([field.with_type(_plain_type(field.type)) for field in schema])


def _plain_type(data_type: pa.DataType) -> pa.DataType:
    if data_type == pa.string_view():
        return pa.string()
    if data_type == pa.binary_view():
        return pa.binary()
    return data_type


def _plain(column: pa.Array, target: pa.DataType) -> pa.Array:
    return column if column.type == target else column.cast(target)


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
