"""What the Flight SQL server needs from the node: the seam between the interface and the queries.

The server only translates Flight SQL requests into these calls and their results into Arrow
streams; :class:`QueryService` is all it knows of the node. One implementation reads the
workspace's datasets through DataFusion (:mod:`odfd.flight_sql.workspace_queries`); the node's
application layer can implement it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from odfd.app.authorization import ANONYMOUS, Principal
from odfd.errors import OdfdError

Subject = Principal
"""Who asks: the node's one authorization subject (an account or anonymous). A dataset it may
not read is not there at all for it: absent from the table lists, unknown to its queries."""

__all__ = ["ANONYMOUS", "Subject"]


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table a subject may read: a dataset by its alias, and the schema a query sees."""

    name: str
    schema: pa.Schema


@dataclass(frozen=True, slots=True, eq=False)
class PlannedQuery:
    """A query that planned, the schema of its result (nullability included) and of its
    parameters (one field per placeholder, ``$1`` first; ``null`` where the type is unknown)."""

    sql: str
    schema: pa.Schema
    parameters: pa.Schema = field(default_factory=lambda: pa.schema([]))
    engine: object = None
    """The engine's plan, opaque to the server: :meth:`QueryService.execute` given this query
    runs it as planned (over the datasets as they were) instead of planning again."""


class QueryStream(Protocol):
    """The result of an executing query, read batch by batch (never whole in memory)."""

    @property
    def schema(self) -> pa.Schema:
        """The schema of every batch: the planned schema, nullability included."""
        ...

    async def next_batch(self) -> pa.RecordBatch | None:
        """The next batch, ``None`` after the last. Raises :class:`QueryTimeoutError` once the
        engine has spent the query's time limit producing batches, :class:`QueryFailedError`
        when the engine fails."""
        ...

    async def close(self) -> None:
        """Stops the query (its engine work included) and releases what it holds; idempotent."""
        ...


class QueryService(Protocol):
    """Queries over the node's datasets, each table a dataset named by its alias."""

    async def tables(self, subject: Subject) -> Sequence[TableInfo]:
        """The tables ``subject`` may read, by name, with their schemas."""
        ...

    async def plan(
        self, subject: Subject, sql: str, parameters: Mapping[str, Any] | None = None
    ) -> PlannedQuery:
        """Plans ``sql`` as ``subject`` sees the datasets now, with ``parameters`` for its
        placeholders (``$1`` is key ``"1"``). Raises :class:`InvalidQueryError`,
        :class:`UnknownTableError` or :class:`DataUnavailableError`."""
        ...

    async def execute(
        self,
        subject: Subject,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        time_limit: float,
        planned: PlannedQuery | None = None,
    ) -> QueryStream:
        """Starts ``sql`` over the datasets as they are now, or ``planned`` (what :meth:`plan`
        answered for it) as it was planned; ``time_limit`` (seconds) bounds the engine's time.
        Raises as :meth:`plan`, and :class:`QueryTimeoutError`."""
        ...


class QueryError(OdfdError):
    """A query that cannot be answered; the message says why, in the user's terms."""


class InvalidQueryError(QueryError):
    """The SQL does not parse or plan (syntax, unknown column or function, a type mismatch)."""


class UnknownTableError(QueryError):
    """The query reads a table that is no dataset this subject may read; ``suggested`` when the
    message names the readable table the caller likely meant."""

    def __init__(self, message: str, *, suggested: bool = False) -> None:
        super().__init__(message)
        self.suggested = suggested


class QueryTimeoutError(QueryError):
    """The query ran past its time limit and was stopped."""


class QueryFailedError(QueryError):
    """The engine accepted the query but failed while running it (a value that does not cast,
    a division by zero), or a dataset it reads changed under it."""


class DataUnavailableError(QueryError):
    """A dataset the query reads cannot be read on this node now (a missing or broken file)."""
