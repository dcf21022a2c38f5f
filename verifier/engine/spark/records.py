"""From read (and preprocessed) data to the ordered records of a new root slice.

Gives the data its event-time column, merges it with the dataset's history, fills event times the
data did not carry with the source's event time, and orders the result the way offsets will be
assigned: by the merge strategy's sort keys, then by position in the input, so the order is total
and reproducible. The result's columns are ``op, event_time``, then the data columns; the system
columns ``offset`` and ``system_time`` are added when the slice is written
(``verifier.engine.output``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.model import Timestamp
from verifier.engine.columns import Vocab
from verifier.engine.errors import IngestError
from verifier.engine.spark.columns import col
from verifier.engine.spark.merge import ORDER_COLUMN, merge

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType


@dataclass(frozen=True, slots=True)
class NewRecords:
    df: DataFrame
    merge_keys: tuple[str, str] | None = None
    """Set when ``df`` is sorted by these two columns (the event time and the input position,
    kept as its last column) within each partition only: the driver merges the partitions
    (``verifier.engine.spark.run_merge``), which costs far less than Spark's global sort."""


def new_records(
    new: DataFrame,
    *,
    prev: DataFrame | None,
    merge_strategy: Any,
    vocab: Vocab,
    source_event_time: Timestamp,
    infer_event_time: bool,
) -> NewRecords:
    """The records this ingest appends, in offset order (see the module docstring)."""
    from pyspark.sql import functions as F

    new = with_event_time(new, vocab, prev, infer=infer_event_time)
    new = new.withColumn(ORDER_COLUMN, F.monotonically_increasing_id())
    merged = merge(merge_strategy, prev, new, vocab)
    event_type = merged.df.schema[vocab.event_time].dataType
    fallback = F.lit(source_event_time.to_datetime()).cast(event_type)
    data_columns = [
        c for c in merged.df.columns if c not in (vocab.op, vocab.event_time, ORDER_COLUMN)
    ]
    filled = merged.df.withColumn(vocab.event_time, F.coalesce(col(vocab.event_time), fallback))
    columns = [col(vocab.op), col(vocab.event_time), *[col(c) for c in data_columns]]
    if merged.by_event_time:
        in_partitions = filled.sortWithinPartitions(col(vocab.event_time), col(ORDER_COLUMN))
        return NewRecords(
            in_partitions.select(*columns, col(ORDER_COLUMN)), (vocab.event_time, ORDER_COLUMN)
        )
    return NewRecords(filled.orderBy(*merged.sort_keys, col(ORDER_COLUMN).asc()).select(*columns))


def with_event_time(
    new: DataFrame, vocab: Vocab, prev: DataFrame | None, *, infer: bool
) -> DataFrame:
    """Checks (or adds) the event-time column.

    Absent: added as nulls of the history's event-time type (a timestamp for a new dataset), to be
    filled with the source event time. Present: must be a timestamp or date; with no declared read
    schema (``infer``), text is parsed as an RFC 3339 timestamp and numbers as Unix seconds, as the
    reference's schema inference does.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        DateType,
        IntegralType,
        StringType,
        TimestampNTZType,
        TimestampType,
    )

    name = vocab.event_time
    if name not in new.columns:
        target: DataType = TimestampType()
        if prev is not None and name in prev.columns:
            target = prev.schema[name].dataType
        return new.withColumn(name, F.lit(None).cast(target))
    data_type = new.schema[name].dataType
    if isinstance(data_type, (TimestampType, TimestampNTZType, DateType)):
        return new
    if infer and isinstance(data_type, StringType):
        return new.withColumn(name, col(name).cast(TimestampType()))
    if infer and isinstance(data_type, IntegralType):
        return new.withColumn(name, F.timestamp_seconds(col(name)))
    raise IngestError(
        f"event time column '{name}' must be a TIMESTAMP or DATE, found {data_type.simpleString().upper()}; "
        "declare its type in the read schema or convert it in a preprocess query"
    )
