"""A query :class:`~odfd.app.live_queries.LiveQueries` planned, as a server runs it: the schema
of its answer, the types its placeholders take, and its batches streamed with the engine's
errors as the application layer's, so the Flight SQL server names no engine."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from odfd.errors import OdfdError
from verifier.engine.datafusion.placeholders import placeholder_types
from verifier.engine.datafusion.session import PlannedQuery, StreamingQuery
from verifier.engine.errors import QueryExecutionError


class InvalidSqlError(OdfdError):
    """SQL that does not plan over the caller's tables (the engine's message)."""


class QueryRunError(OdfdError):
    """A planned query that failed while it ran (the engine's message)."""


@dataclass(frozen=True, eq=False)
class LivePlan:
    """A planned query; each :meth:`stream` runs it anew."""

    planned: PlannedQuery

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch, nullability included."""
        return self.planned.schema

    def placeholder_types(self) -> dict[str, pa.DataType]:
        """The type the plan gives each ``$n`` placeholder it holds."""
        return placeholder_types(self.planned.frame.logical_plan())

    def stream(self) -> LiveStream:
        return LiveStream(self.planned.stream())


class LiveStream:
    """A running query read batch by batch: :meth:`start` (blocking) sets it up,
    :meth:`next_batch` runs the engine to the next batch, :meth:`close` stops it."""

    def __init__(self, query: StreamingQuery) -> None:
        self._query = query

    @property
    def schema(self) -> pa.Schema:
        return self._query.schema

    def start(self) -> None:
        try:
            self._query.start()
        except QueryExecutionError as err:
            raise QueryRunError(str(err)) from None

    async def next_batch(self) -> pa.RecordBatch | None:
        """The next batch, ``None`` after the last."""
        try:
            return await self._query.next_batch()
        except QueryExecutionError as err:
            raise QueryRunError(str(err)) from None

    def close(self) -> None:
        self._query.close()
