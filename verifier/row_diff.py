"""A small sample of the records that differ between a recorded slice and its re-execution.

When a transaction does not reproduce, the logical hash only says *that* the records differ; an
auditor wants to see *how*. Both files are read in Spark (slices can be large) and compared as
multisets of whole records, in both directions, keeping the first few by offset.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

from verifier.engine.columns import col
from verifier.engine.session import isolated_session


def sample_differences(
    recorded: Path, recomputed: Path, offset_column: str, limit: int
) -> dict[str, Any]:
    """``{"recordedOnly": [...], "recomputedOnly": [...]}``: up to ``limit`` rows each, by offset.

    If the two files do not even have the same columns, that is said instead (``columnsDiffer``)
    and the first rows of each are shown.
    """
    spark = isolated_session()
    left = spark.read.parquet(str(recorded))
    right = spark.read.parquet(str(recomputed))
    sample: dict[str, Any] = {"limit": limit}
    if left.schema.simpleString() != right.schema.simpleString():
        sample["columnsDiffer"] = {
            "recorded": left.schema.simpleString(),
            "recomputed": right.schema.simpleString(),
        }
        only_left, only_right = left, right
    else:
        only_left, only_right = left.exceptAll(right), right.exceptAll(left)
    sample["recordedOnly"] = _first_rows(only_left, offset_column, limit)
    sample["recomputedOnly"] = _first_rows(only_right, offset_column, limit)
    return sample


def _first_rows(df: Any, offset_column: str, limit: int) -> list[dict[str, Any]]:
    if offset_column in df.columns:
        df = df.orderBy(col(offset_column))
    table = df.limit(limit).toArrow()
    return [{name: json_value(value) for name, value in row.items()} for row in table.to_pylist()]


def json_value(value: Any) -> Any:
    """A value of a record as JSON: instants in RFC 3339, binary in base64, exact decimals as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)
