"""Finds the first malformed record of an input file and names its file, row, line and column.

Runs only after a FAILFAST read failed. The file is re-read in Spark's PERMISSIVE mode as a single
partition, so a generated row id is the record's position in the file, and the raw text Spark keeps
for the bad record is compared with the declared columns to find the offending value.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.engine.errors import BadInputError
from verifier.engine.spark.columns import col
from verifier.engine.spark.session import isolated_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

CORRUPT = "__odfd_corrupt_record"
ROW = "__odfd_row"

_MARKERS = (
    "MALFORMED_RECORD_IN_PARSING",
    "FAILED_READ_FILE",
    "CAST_INVALID_INPUT",
    "Malformed records",
)


def looks_like_bad_input(err: BaseException) -> bool:
    """Whether a Spark failure may come from malformed input (worth a diagnosis)."""
    text = str(err)
    return any(marker in text for marker in _MARKERS)


def diagnose_csv(
    spark: SparkSession,
    path: Path,
    schema: StructType,
    options: dict[str, str],
    header: bool,
    null_value: str,
) -> BadInputError | None:
    found = _first_corrupt(_read_permissive("csv", path, schema, options))
    if found is None:
        return None
    row, index, count = found
    text = row[CORRUPT]
    line = _line_of_record(
        path, index, skip_first=header, encoding=options.get("encoding", "UTF-8")
    )
    tokens = next(csv.reader([text], **_csv_dialect(options)), [])
    where = f"{path}: malformed row {index + 1} (line {line})"
    if len(tokens) != len(schema.fields):
        column, detail = (
            None,
            f"has {len(tokens)} values but the schema has {len(schema.fields)} columns",
        )
    else:
        column, detail = None, f"cannot be parsed: {text!r}"
        for field, token in zip(schema.fields, tokens, strict=True):
            if token not in ("", null_value) and row[field.name] is None:
                column = field.name
                detail = f"value {token!r} is not a valid {field.dataType.simpleString().upper()}"
                break
    return _error(where, column, detail, count, path, line, index + 1)


def diagnose_json_lines(
    spark: SparkSession,
    lines: Path,
    schema: StructType,
    options: dict[str, str],
    *,
    source: Path,
    record_unit: str | None,
) -> BadInputError | None:
    found = _first_corrupt(_read_permissive("json", lines, schema, options))
    if found is None:
        return None
    row, index, count = found
    text = row[CORRUPT]
    if record_unit is None:
        line: int | None = _line_of_record(
            lines, index, skip_first=False, encoding=options.get("encoding", "UTF-8")
        )
        where = f"{source}: malformed row {index + 1} (line {line})"
    else:
        line = None
        where = f"{source}: malformed {record_unit} {index + 1}"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        return _error(where, None, f"is not valid JSON: {err.msg}", count, source, line, index + 1)
    column, detail = None, f"cannot be parsed: {text[:200]!r}"
    if isinstance(record, dict):
        for field in schema.fields:
            raw = record.get(field.name)
            if raw is not None and row[field.name] is None:
                column = field.name
                detail = f"value {json.dumps(raw)[:100]} is not a valid {field.dataType.simpleString().upper()}"
                break
    else:
        detail = "is not a JSON object"
    return _error(where, column, detail, count, source, line, index + 1)


def apply_schema(df: DataFrame, schema: StructType, path: Path) -> DataFrame:
    """Casts a self-describing file's columns to the declared types (ANSI: a bad value fails)."""
    missing = [f.name for f in schema.fields if f.name not in df.columns]
    if missing:
        raise BadInputError(
            f"{path}: declared column(s) {', '.join(missing)} not found in the file", path=str(path)
        )
    return df.select(*[col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def diagnose_casts(spark: SparkSession, path: Path, schema: StructType) -> BadInputError | None:
    from pyspark.sql import functions as F

    session = _one_partition_session()
    df = session.read.parquet(str(path)).withColumn(ROW, F.monotonically_increasing_id())
    first: tuple[int, str, Any, int] | None = None
    for field in schema.fields:
        if field.name not in df.columns:
            continue
        failing = df.where(
            col(field.name).isNotNull() & col(field.name).try_cast(field.dataType).isNull()
        )
        stats = failing.agg(F.min(ROW).alias("row"), F.count(F.lit(1)).alias("n")).collect()[0]
        if stats["n"]:
            value = failing.where(col(ROW) == stats["row"]).select(col(field.name)).collect()[0][0]
            if first is None or stats["row"] < first[0]:
                first = (stats["row"], field.name, value, stats["n"])
    if first is None:
        return None
    index, name, value, count = first
    field = schema[name]
    return _error(
        f"{path}: malformed row {index + 1}",
        name,
        f"value {value!r} is not a valid {field.dataType.simpleString().upper()}",
        count,
        path,
        None,
        index + 1,
    )


def _one_partition_session() -> SparkSession:
    """A session that reads a file as one partition, so generated row ids count records.

    Spark splits a file into at least ``minPartitionNum`` parts (default: the number of cores)
    whatever the maximum partition size; both must allow a single part.
    """
    session = isolated_session()
    session.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 50))
    session.conf.set("spark.sql.files.minPartitionNum", "1")
    return session


def _read_permissive(
    source_format: str, path: Path, schema: StructType, options: dict[str, str]
) -> DataFrame:
    """``path`` read in one partition, malformed records kept whole in the ``CORRUPT`` column."""
    from pyspark.sql.types import StringType, StructField, StructType

    with_corrupt = StructType([*schema.fields, StructField(CORRUPT, StringType())])
    return (
        _one_partition_session()
        .read.options(**options, mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
        .schema(with_corrupt)
        .format(source_format)
        .load(str(path))
    )


def _first_corrupt(df: DataFrame) -> tuple[Any, int, int] | None:
    """The first corrupt record, its 0-based position and how many corrupt records there are."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # Spark refuses queries that need only the corrupt-record column from a raw file unless the
    # parsed result is materialised first; on disk, since the file may be large.
    numbered = df.withColumn(ROW, F.monotonically_increasing_id()).persist(StorageLevel.DISK_ONLY)
    try:
        bad = numbered.where(col(CORRUPT).isNotNull())
        count = bad.count()
        if count == 0:
            return None
        row = bad.orderBy(col(ROW)).limit(1).collect()[0]
        return row, int(row[ROW]), count
    finally:
        numbered.unpersist()


def _line_of_record(path: Path, index: int, *, skip_first: bool, encoding: str) -> int:
    """The 1-based line holding record ``index`` (0-based; empty lines are not records)."""
    seen = -1 if skip_first else 0
    last = 0
    for number, line in _lines(path, encoding):
        last = number
        if line.strip("\r\n") == "":
            continue
        if seen == index:
            return number
        seen += 1
    return last


def _lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    with open(path, encoding=encoding, errors="replace", newline="") as inp:
        yield from enumerate(inp, 1)


def _csv_dialect(options: dict[str, str]) -> dict[str, Any]:
    quote = options.get("quote", '"')
    escape = options.get("escape", "\\")
    return {
        "delimiter": options.get("sep", ","),
        "quotechar": quote or None,
        "quoting": csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
        "escapechar": escape or None,
        "doublequote": True,
    }


def _error(
    where: str,
    column: str | None,
    detail: str,
    count: int,
    path: Path,
    line: int | None,
    record: int,
) -> BadInputError:
    message = f"{where}, column '{column}': {detail}" if column else f"{where}: {detail}"
    if count > 1:
        message += f" ({count - 1} more malformed row{'s' if count > 2 else ''} in this file)"
    return BadInputError(message, path=str(path), line=line, record=record, column=column)
