"""The console's SQL box: a query over the datasets a request may see, through the same query
function and engine as ``odfd sql`` (DataFusion: names quoted with double quotes), with the result
cut to a page and made JSON-safe."""

from __future__ import annotations

import asyncio
import base64
import math
import time
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from odfd.cli.commands.sql import DEFAULT_ENGINE, run_query
from odfd.coordinator.query import dataset_view
from storage.catalog import DatasetRecord
from storage.workspace import Workspace
from verifier.engine.registry import Engines

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
    workspace: Workspace,
    engines: Engines,
    query: str,
    limit: int,
    visible: Callable[[DatasetRecord], bool],
) -> tuple[list[str], list[list[Any]], bool, float]:
    """``(columns, rows, truncated, milliseconds)``; only datasets ``visible`` allows are tables."""
    started = time.perf_counter()
    lowered = query.lower()
    views = []
    for record in await workspace.list_datasets():
        if visible(record) and record.alias.lower() in lowered:
            views.append(await dataset_view(workspace.open_dataset(record.id)))
    table = await asyncio.to_thread(run_query, engines, query, views, SQL_BOX_ENGINE)
    truncated = table.num_rows > limit
    table = table.slice(0, limit)
    columns = table.column_names
    rows = [[json_cell(row[c]) for c in columns] for row in table.to_pylist()]
    return columns, rows, truncated, round((time.perf_counter() - started) * 1000, 1)
