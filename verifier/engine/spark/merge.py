"""Merge strategies: how newly read data is combined with a root dataset's history.

Each strategy is a pure function of Spark DataFrames: ``prev`` is the dataset's whole history
(system columns included, ``None`` before the first slice) and ``new`` is the preprocessed input,
carrying the event-time column and :data:`ORDER_COLUMN` (the record's position in the input, the
tie-breaker that makes the output order deterministic). The result holds the ``op`` column first,
then the data columns, and the sort keys that define the order offsets are assigned in.

Semantics follow the reference implementation (kamu-cli's DataFusion merge strategies) with a few
deliberate differences, each noted where it happens: rows whose only columns are the primary key
are still detected as appearing/disappearing, snapshot keys must be unique and non-null, and
changelog/upsert streams are validated instead of trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verifier.engine.columns import Op, Vocab
from verifier.engine.errors import MergeError
from verifier.engine.spark.columns import col, quote

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Position of each record in the input; removed before the slice is written.
ORDER_COLUMN = "__odfd_order"

_OLD = "__odfd_old__"
_RANK = "__odfd_rank"


@dataclass(frozen=True)
class Merged:
    """The records to append (``op`` + data columns + :data:`ORDER_COLUMN`) and their order."""

    df: DataFrame
    sort_keys: list[Column]
    by_event_time: bool = False
    """``sort_keys`` are the event time alone (then the input position)."""


def merge(strategy: Any, prev: DataFrame | None, new: DataFrame, vocab: Vocab) -> Merged:
    """Applies a ``MergeStrategy`` model object."""
    kind = type(strategy).__name__
    handler = _STRATEGIES.get(kind)
    if handler is None:
        raise MergeError(f"merge strategy {kind} is not supported")
    return handler(strategy, prev, new, vocab)


def merge_append(_: Any, prev: DataFrame | None, new: DataFrame, vocab: Vocab) -> Merged:
    _reject_system_columns(new, vocab, allow_op=False)
    return Merged(_with_op(new, vocab, Op.APPEND), _event_time_order(vocab), by_event_time=True)


def merge_ledger(strategy: Any, prev: DataFrame | None, new: DataFrame, vocab: Vocab) -> Merged:
    """Appends only records whose primary key was never seen before."""
    pk = _primary_key(strategy, new, "Ledger")
    _reject_system_columns(new, vocab, allow_op=False)
    if prev is not None:
        seen = prev.select(*[col(c) for c in pk]).distinct()
        new = new.join(seen, on=_join_on(new, seen, pk), how="left_anti")
    return Merged(_with_op(new, vocab, Op.APPEND), _event_time_order(vocab), by_event_time=True)


def merge_snapshot(strategy: Any, prev: DataFrame | None, new: DataFrame, vocab: Vocab) -> Merged:
    """Change data capture between the previous state and a new full snapshot (RFC-015).

    A key that appears is ``+A``; one that disappears is ``-R`` carrying its last values; one
    whose compared columns changed is a ``-C`` (old values) immediately followed by ``+C`` (new
    values). An event time that is null in the new snapshot (to be filled from the source) does
    not by itself count as a change.
    """
    from pyspark.sql import functions as F

    pk = _primary_key(strategy, new, "Snapshot")
    _reject_system_columns(new, vocab, allow_op=False)
    _require_unique_keys(new, pk, "Snapshot")
    sort_keys = [*[col(c).asc_nulls_first() for c in pk], col(vocab.op).asc()]
    if prev is None:
        return Merged(_with_op(new, vocab, Op.APPEND), sort_keys)

    data_columns = [c for c in new.columns if c != ORDER_COLUMN]
    compare = list(
        getattr(strategy, "compare_columns", None) or [c for c in data_columns if c not in pk]
    )
    missing = [c for c in compare if c not in data_columns]
    if missing:
        raise MergeError(f"Snapshot: compareColumns {', '.join(missing)} not found in the data")

    old = _project_state(prev, pk, vocab)
    old = old.select(*[_old_value(old, c).alias(_OLD + c) for c in data_columns])
    joined = old.join(new, on=[col(_OLD + c) == col(c) for c in pk], how="full_outer")

    appeared = col(_OLD + pk[0]).isNull()
    vanished = col(pk[0]).isNull()
    changed = _any_changed(compare, vocab)
    cdc = joined.where(appeared | vanished | changed)

    op = (
        F.when(appeared, F.lit(int(Op.APPEND)))
        .when(vanished, F.lit(int(Op.RETRACT)))
        .otherwise(F.lit(int(Op.CORRECT_TO)))
        .cast("int")
    )
    current = cdc.select(
        op.alias(vocab.op),
        *[F.when(vanished, col(_OLD + c)).otherwise(col(c)).alias(c) for c in data_columns],
        col(ORDER_COLUMN),
    )
    corrected_from = cdc.where(~appeared & ~vanished).select(
        F.lit(int(Op.CORRECT_FROM)).cast("int").alias(vocab.op),
        *[col(_OLD + c).alias(c) for c in data_columns],
        col(ORDER_COLUMN),
    )
    return Merged(current.unionByName(corrected_from), sort_keys)


def merge_changelog_stream(
    strategy: Any, prev: DataFrame | None, new: DataFrame, vocab: Vocab
) -> Merged:
    """Takes an RFC-015 changelog as is, after checking it is one.

    Checked: the ``op`` column exists and holds 0-3, and per primary key every ``-C`` is
    immediately followed by a ``+C`` and every ``+C`` immediately preceded by a ``-C``. Records
    keep their input order within a key (the reference re-sorts by op, which would move a
    re-append before the retraction it follows).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pk = _primary_key(strategy, new, "ChangelogStream")
    _reject_system_columns(new, vocab, allow_op=True)
    if vocab.op not in new.columns:
        raise MergeError(f"ChangelogStream: the data has no operation type column '{vocab.op}'")
    new = new.withColumn(vocab.op, _int_op(new, vocab))
    window = Window.partitionBy(*[col(c) for c in pk]).orderBy(col(ORDER_COLUMN))
    op = col(vocab.op)
    before, after = F.lag(op).over(window), F.lead(op).over(window)
    problem = (
        F.when(op.isNull() | ~op.isin(*[int(o) for o in Op]), F.lit("an unknown operation type"))
        .when(
            (op == int(Op.CORRECT_FROM)) & (after.isNull() | (after != int(Op.CORRECT_TO))),
            F.lit("a correct-from (-C) not followed by a correct-to (+C)"),
        )
        .when(
            (op == int(Op.CORRECT_TO)) & (before.isNull() | (before != int(Op.CORRECT_FROM))),
            F.lit("a correct-to (+C) not preceded by a correct-from (-C)"),
        )
    )
    bad = new.select("*", problem.alias("__problem")).where(col("__problem").isNotNull())
    first = bad.orderBy(col(ORDER_COLUMN)).limit(1).collect()
    if first:
        row = first[0].asDict()
        raise MergeError(
            f"ChangelogStream: invalid changelog, {row['__problem']} "
            f"(op {row[vocab.op]}) for key {_describe_key(row, pk)}"
        )
    ordered = [c for c in new.columns if c != vocab.op]
    return Merged(
        new.select(col(vocab.op), *[col(c) for c in ordered]),
        [*[col(c).asc_nulls_first() for c in pk], col(ORDER_COLUMN).asc()],
    )


def merge_upsert_stream(
    strategy: Any, prev: DataFrame | None, new: DataFrame, vocab: Vocab
) -> Merged:
    """Turns upserts (``+A`` = insert or update) and deletes (``-R``) into a changelog.

    Within the batch only the last event per key counts. Against the latest state per key: an
    upsert of an unknown key is ``+A``, of a known key with different values ``-C``/``+C``, with
    equal values nothing; a delete of a known key is ``-R`` with the last values, of an unknown
    key nothing.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pk = _primary_key(strategy, new, "UpsertStream")
    _reject_system_columns(new, vocab, allow_op=True)
    if vocab.op in new.columns:
        new = new.withColumn(vocab.op, _int_op(new, vocab))
        bad = new.where(
            col(vocab.op).isNull() | ~col(vocab.op).isin(int(Op.APPEND), int(Op.RETRACT))
        )
        first = bad.limit(1).collect()
        if first:
            row = first[0].asDict()
            raise MergeError(
                f"UpsertStream: operation type {row[vocab.op]} for key {_describe_key(row, pk)} "
                "is neither an upsert (0) nor a delete (1)"
            )
    else:
        new = new.withColumn(vocab.op, F.lit(int(Op.APPEND)).cast("int"))
    data_columns = [c for c in new.columns if c not in (vocab.op, ORDER_COLUMN)]
    sort_keys = [*[col(c).asc_nulls_first() for c in pk], col(vocab.op).asc()]

    latest_in_batch = Window.partitionBy(*[col(c) for c in pk]).orderBy(col(ORDER_COLUMN).desc())
    new = (
        new.withColumn(_RANK, F.row_number().over(latest_in_batch))
        .where(col(_RANK) == 1)
        .drop(_RANK)
    )

    if prev is None:
        old = None
    else:
        state = _project_state(prev, pk, vocab)
        old = state.select(*[_old_value(state, c).alias(_OLD + c) for c in data_columns])
    if old is None:
        appended = new.where(col(vocab.op) == int(Op.APPEND)).select(
            F.lit(int(Op.APPEND)).cast("int").alias(vocab.op),
            *[col(c) for c in data_columns],
            col(ORDER_COLUMN),
        )
        return Merged(appended, sort_keys)

    joined = new.join(old, on=[col(c) == col(_OLD + c) for c in pk], how="left")
    is_delete = col(vocab.op) == int(Op.RETRACT)
    known = col(_OLD + pk[0]).isNotNull()
    ordinary = [c for c in data_columns if c not in pk]
    diff = joined.where(
        (is_delete & known) | (~is_delete & (~known | _any_changed(ordinary, vocab)))
    )

    op = (
        F.when(is_delete, F.lit(int(Op.RETRACT)))
        .when(~known, F.lit(int(Op.APPEND)))
        .otherwise(F.lit(int(Op.CORRECT_TO)))
        .cast("int")
    )
    current = diff.select(
        op.alias(vocab.op),
        *[F.when(is_delete, col(_OLD + c)).otherwise(col(c)).alias(c) for c in data_columns],
        col(ORDER_COLUMN),
    )
    corrected_from = diff.where(~is_delete & known).select(
        F.lit(int(Op.CORRECT_FROM)).cast("int").alias(vocab.op),
        *[col(_OLD + c).alias(c) for c in data_columns],
        col(ORDER_COLUMN),
    )
    return Merged(current.unionByName(corrected_from), sort_keys)


def _project_state(ledger: DataFrame, pk: list[str], vocab: Vocab) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest = Window.partitionBy(*[col(c) for c in pk]).orderBy(col(vocab.offset).desc())
    return (
        ledger.withColumn(_RANK, F.row_number().over(latest))
        .where((col(_RANK) == 1) & (col(vocab.op) != int(Op.RETRACT)))
        .drop(_RANK)
    )


def _old_value(old: DataFrame, name: str) -> Column:
    """A column of the previous state; a column the history lacks (added later) reads as null."""
    from pyspark.sql import functions as F

    return col(name) if name in old.columns else F.lit(None)


def _any_changed(columns: list[str], vocab: Vocab) -> Column:
    from pyspark.sql import functions as F

    result = F.lit(False)
    for c in columns:
        differs = ~col(_OLD + c).eqNullSafe(col(c))
        if c == vocab.event_time:
            differs = col(c).isNotNull() & differs
        result = result | differs
    return result


def _with_op(df: DataFrame, vocab: Vocab, op: Op) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(F.lit(int(op)).cast("int").alias(vocab.op), *[col(c) for c in df.columns])


def _event_time_order(vocab: Vocab) -> list[Column]:
    return [col(vocab.event_time).asc_nulls_first()]


def _int_op(df: DataFrame, vocab: Vocab) -> Column:
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

    field = df.schema[vocab.op]
    if not isinstance(field.dataType, (ByteType, ShortType, IntegerType, LongType)):
        raise MergeError(
            f"operation type column '{vocab.op}' must be an integer, found {field.dataType.simpleString()}"
        )
    return col(vocab.op).cast("int")


def _primary_key(strategy: Any, new: DataFrame, name: str) -> list[str]:
    pk = list(getattr(strategy, "primary_key", None) or [])
    if not pk:
        raise MergeError(f"{name}: primaryKey must name at least one column")
    missing = [c for c in pk if c not in new.columns]
    if missing:
        raise MergeError(
            f"{name}: primary key column(s) {', '.join(missing)} not found in the data "
            f"(columns: {', '.join(c for c in new.columns if c != ORDER_COLUMN)})"
        )
    return pk


def _reject_system_columns(new: DataFrame, vocab: Vocab, *, allow_op: bool) -> None:
    reserved = [vocab.offset, vocab.system_time] + ([] if allow_op else [vocab.op])
    clashes = [c for c in reserved if c in new.columns]
    if clashes:
        raise MergeError(
            f"the data has column(s) {', '.join(clashes)} that clash with system column names; "
            "rename them in a preprocess query or set a different vocabulary (SetVocab)"
        )


def _require_unique_keys(new: DataFrame, pk: list[str], name: str) -> None:
    """A snapshot row is identified by its key: a null or repeated key makes the diff ambiguous."""
    from pyspark.sql import functions as F

    any_null = F.lit(False)
    for c in pk:
        any_null = any_null | col(c).isNull()
    if new.where(any_null).limit(1).count():
        raise MergeError(f"{name}: primary key column(s) {', '.join(pk)} contain null values")
    dupes = new.groupBy(*[col(c) for c in pk]).count().where(col("count") > 1).limit(1).collect()
    if dupes:
        row = dupes[0].asDict()
        raise MergeError(
            f"{name}: primary key {_describe_key(row, pk)} appears {row['count']} times in the new data"
        )


def _join_on(left: DataFrame, right: DataFrame, pk: list[str]) -> list[Column]:
    return [left[quote(c)] == right[quote(c)] for c in pk]


def _describe_key(row: dict[str, Any], pk: list[str]) -> str:
    return "(" + ", ".join(f"{c}={row.get(c)!r}" for c in pk) + ")"


_STRATEGIES = {
    "MergeStrategyAppend": merge_append,
    "MergeStrategyLedger": merge_ledger,
    "MergeStrategySnapshot": merge_snapshot,
    "MergeStrategyChangelogStream": merge_changelog_stream,
    "MergeStrategyUpsertStream": merge_upsert_stream,
}
