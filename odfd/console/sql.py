"""The console's SQL box: a query over the datasets a request may see, through the same query
function and engine as ``odfd sql`` (DataFusion: names quoted with double quotes), with the result
cut to a page and made JSON-safe."""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from odfd.app.node import Node
from odfd.app.query import DEFAULT_ENGINE, query
from storage.catalog import DatasetRecord

SQL_BOX_ENGINE = DEFAULT_ENGINE
"""The engine the SQL box runs in: the one ``odfd sql`` uses unless told otherwise."""


def json_cell(value: Any) -> Any:
    """Instants as RFC 3339, binary as base64, decimals and non-finite floats as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return [json_cell(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_cell(v) for k, v in value.items()}
    return value


async def run_sql(
    node: Node,
    sql: str,
    limit: int,
    visible: Callable[[DatasetRecord], bool],
) -> tuple[list[str], list[list[Any]], bool, float]:
    """``(columns, rows, truncated, milliseconds)``; only datasets ``visible`` allows are tables."""
    started = time.perf_counter()
    table = await query(node, sql, engine=SQL_BOX_ENGINE, visible=visible)
    truncated = table.num_rows > limit
    table = table.slice(0, limit)
    columns = table.column_names
    rows = [[json_cell(row[c]) for c in columns] for row in table.to_pylist()]
    return columns, rows, truncated, round((time.perf_counter() - started) * 1000, 1)
