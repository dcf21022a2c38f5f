"""The console's SQL box: a query over the datasets a request may see, through the same query
function and engine as ``odfd sql`` (DataFusion: names quoted with double quotes), with the result
cut to a page and made JSON-safe. Asked for a proof, it answers as ``odfd sql -o json --proof``
does: the rows shown are exactly those of the signed answer returned beside them."""

from __future__ import annotations

import base64
import math
import time
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from odfd.app.answer_checks import answer_with_proof
from odfd.app.node import Node
from odfd.app.query import DEFAULT_ENGINE, query

if TYPE_CHECKING:
    from odfd.app.answers import Visible

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
    visible: Visible,
) -> tuple[list[str], list[list[Any]], bool, float]:
    """``(columns, rows, truncated, milliseconds)``; only datasets ``visible`` allows are tables."""
    started = time.perf_counter()
    table = await query(node, sql, engine=SQL_BOX_ENGINE, visible=visible)
    truncated = table.num_rows > limit
    columns, rows = _page(table.slice(0, limit))
    return columns, rows, truncated, round((time.perf_counter() - started) * 1000, 1)


async def run_sql_with_proof(
    node: Node,
    sql: str,
    limit: int,
    visible: Visible,
) -> tuple[list[str], list[list[Any]], bool, float, dict[str, Any]]:
    """``(columns, rows, truncated, milliseconds, answer)``: the answer is signed with the
    node's key and holds at most ``limit`` rows (or the node's cap); ``truncated`` when it is
    full, as more rows may exist."""
    started = time.perf_counter()
    limit = min(limit, node.config.server.query_max_rows)
    proven = await answer_with_proof(node, sql, engine=SQL_BOX_ENGINE, limit=limit, visible=visible)
    columns, rows = _page(proven.table)
    ms = round((time.perf_counter() - started) * 1000, 1)
    return columns, rows, proven.table.num_rows >= limit, ms, proven.document


def _page(table: pa.Table) -> tuple[list[str], list[list[Any]]]:
    columns = table.column_names
    return columns, [[json_cell(row[c]) for c in columns] for row in table.to_pylist()]
