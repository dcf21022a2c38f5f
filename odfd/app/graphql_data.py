"""Rows for the GraphQL API (``/graphql``): a dataset's tail and a SQL query's result, run as the
query API runs them (``odfd.app.answers``: its engines, its limits, the datasets the caller may
read) and rendered as the reference's GraphQL ``DataQueryResult`` carries them, the rows and the
schema as text in the format asked for."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.app import answers
from protocol.query import DataFormat, QueryDialect, QueryRequest, SchemaFormat

if TYPE_CHECKING:
    from odfd.app.answers import Answer, QueryLimits, Visible
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord

BATCH_FORMATS = {
    "JSON": DataFormat.JSON_AOS,
    "JSON_AOS": DataFormat.JSON_AOS,
    "JSON_SOA": DataFormat.JSON_SOA,
    "JSON_AOA": DataFormat.JSON_AOA,
    "ND_JSON": DataFormat.JSON_AOS,
    "JSON_LD": DataFormat.JSON_AOS,
    "CSV": DataFormat.JSON_AOS,
}
"""Each GraphQL batch format and the query API's format it is rendered from (newline-delimited
JSON and CSV are written from the array of records)."""
SCHEMA_FORMATS = {
    "ARROW_JSON": SchemaFormat.ARROW_JSON,
    "PARQUET": SchemaFormat.PARQUET,
    "PARQUET_JSON": SchemaFormat.PARQUET_JSON,
}
DIALECTS = {
    "SQL_DATA_FUSION": QueryDialect.SQL_DATAFUSION,
    "SQL_SPARK": QueryDialect.SQL_SPARK,
    "SQL_FLINK": QueryDialect.SQL_FLINK,
    "SQL_RISING_WAVE": QueryDialect.SQL_RISING_WAVE,
}


@dataclass(frozen=True, slots=True)
class DataResult:
    """A ``DataQueryResultSuccess``: formats are the GraphQL enums' names."""

    schema_format: str
    schema: str
    data_format: str
    data: str
    num_records: int
    datasets: tuple[tuple[str, str, str | None], ...]
    """``(id, alias, block hash)`` of each dataset as the query read it."""
    limit: int


@dataclass(frozen=True, slots=True)
class InvalidSql:
    """A ``DataQueryResultError``: the query cannot be planned or run over these datasets."""

    message: str


async def tail(
    node: Node,
    record: DatasetRecord,
    *,
    skip: int,
    limit: int,
    data_format: str,
    schema_format: str,
    limits: QueryLimits,
) -> DataResult:
    """The dataset's last ``limit`` records after the newest ``skip``, oldest first."""
    answer = await answers.tail(
        node,
        record,
        skip=skip,
        limit=limit,
        data_format=BATCH_FORMATS[data_format],
        schema_format=SCHEMA_FORMATS[schema_format],
        limits=limits,
    )
    return await _result(answer, data_format, schema_format, limit)


async def query(
    node: Node,
    visible: Visible,
    sql: str,
    *,
    dialect: str,
    skip: int,
    limit: int,
    data_format: str,
    schema_format: str,
    limits: QueryLimits,
) -> DataResult | InvalidSql:
    """``sql`` over the datasets the caller may read; an error of the query itself (it does not
    parse, names a dataset or column there is not) is an ``InvalidSql`` answer, as in the
    reference; the node's refusals (a limit above its cap) raise ``AnswerError``."""
    request = QueryRequest(
        sql,
        query_dialect=DIALECTS[dialect],
        data_format=BATCH_FORMATS[data_format],
        schema_format=SCHEMA_FORMATS[schema_format],
        skip=skip,
        limit=limit,
    )
    try:
        answer = await answers.execute(node, request, visible=visible, limits=limits)
    except (
        answers.BadQueryError,
        answers.QueryFailedError,
        answers.QueryDatasetNotFoundError,
    ) as error:
        return InvalidSql(str(error))
    return await _result(answer, data_format, schema_format, limit)


async def _result(answer: Answer, data_format: str, schema_format: str, limit: int) -> DataResult:
    schema, rows = await asyncio.to_thread(_render, answer, data_format)
    datasets = tuple(
        (str(state.id), state.alias, None if state.block_hash is None else str(state.block_hash))
        for state in answer.datasets
    )
    return DataResult(schema_format, schema, data_format, rows, answer.num_rows, datasets, limit)


def _render(answer: Answer, data_format: str) -> tuple[str, str]:
    """The schema and the rows as text (CPU-bound: off the event loop)."""
    output = json.loads(answer.render_output())
    schema = output.get("schema")
    text = schema if isinstance(schema, str) else _compact(schema)
    return text, _batch_text(output.get("data", []), data_format, answer)


def _batch_text(data: object, data_format: str, answer: Answer) -> str:
    if data_format in ("ND_JSON", "JSON_LD"):
        assert isinstance(data, list)
        return "".join(_compact(record) + "\n" for record in data)
    if data_format == "CSV":
        import pyarrow as pa

        from odfd.app.csv_text import csv_text

        return csv_text(pa.Table.from_batches(answer.batches, answer.schema))
    return _compact(data)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
