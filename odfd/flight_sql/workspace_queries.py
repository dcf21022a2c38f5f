"""The Flight SQL server's :class:`~odfd.flight_sql.service.QueryService` over a workspace: its
datasets registered by alias in DataFusion, as ``odfd sql`` reads them.

What a dataset contributes (its slices and schema at a block) is read from its chain once per
head and kept; a query registers only the datasets its text names, each at the block its plan
saw. Private datasets are left out for a subject that may not read them, so to that subject
they do not exist.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

import pyarrow as pa

from odfd.coordinator.query import DatasetView, dataset_view
from odfd.flight_sql import endpoint
from odfd.flight_sql.endpoint import FlightSqlEndpoint
from odfd.flight_sql.service import (
    DataUnavailableError,
    InvalidQueryError,
    PlannedQuery,
    QueryFailedError,
    QueryTimeoutError,
    Subject,
    TableInfo,
    UnknownTableError,
)
from odfd.server.config import ServerConfig
from protocol.errors import OdfError, ParseError
from protocol.identity import DatasetId, Multihash
from protocol.model import SqlQueryStep
from storage.catalog.records import DatasetRecord
from storage.workspace import Workspace
from verifier.engine import errors as engine_errors
from verifier.engine.contract import QueryTable
from verifier.engine.datafusion.engine import StreamingQuery
from verifier.engine.errors import QueryExecutionError

T = TypeVar("T")
_PlanKey = tuple[bool, str, tuple[tuple[str, str], ...]]

_KEPT_PLANS = 64
"""Planned queries kept for their execution (each holds a session and a scratch folder)."""

_UNKNOWN_TABLE = re.compile(r"table '(?:[^'.]*\.)?(?:[^'.]*\.)?([^']*)' not found")


@dataclass(frozen=True, slots=True)
class _Cached:
    head: Multihash | None
    view: DatasetView


class WorkspaceQueries:
    """Queries over ``workspace``'s datasets; ``is_private(alias)`` says which are private."""

    def __init__(self, workspace: Workspace, is_private: Callable[[str], bool]) -> None:
        self._workspace = workspace
        self._is_private = is_private
        self._views: dict[DatasetId, _Cached] = {}
        self._planned: OrderedDict[_PlanKey, StreamingQuery] = OrderedDict()

    async def tables(self, subject: Subject) -> Sequence[TableInfo]:
        views = [await self._view(record) for record in await self._readable(subject)]
        return [TableInfo(view.alias, view.schema or pa.schema([])) for view in views]

    async def plan(self, subject: Subject, sql: str) -> PlannedQuery:
        views = await self._views_for(subject, sql, {})
        query = await asyncio.to_thread(_streaming_query, sql, views)
        pinned = {view.alias: str(view.head) for view in views if view.head is not None}
        # Kept for the execution that usually follows (GetFlightInfo, then DoGet), which then
        # plans nothing again; the oldest unclaimed plans go.
        self._planned[_plan_key(subject, sql, pinned)] = query
        while len(self._planned) > _KEPT_PLANS:
            await asyncio.to_thread(self._planned.popitem(last=False)[1].close)
        return PlannedQuery(sql, query.schema, MappingProxyType(pinned))

    async def execute(
        self, subject: Subject, sql: str, pinned: Mapping[str, str], *, time_limit: float
    ) -> _Stream:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + time_limit
        streaming = self._planned.pop(_plan_key(subject, sql, pinned), None)
        if streaming is None:
            views = await self._views_for(subject, sql, pinned)
            streaming = await asyncio.to_thread(_streaming_query, sql, views)
        stream = _Stream(streaming, time_limit, deadline - loop.time())
        try:
            await stream.start()
        except BaseException:
            await stream.close()
            raise
        return stream

    async def _readable(self, subject: Subject) -> list[DatasetRecord]:
        records = await self._workspace.list_datasets()
        if subject.may_read_private:
            return records
        return [record for record in records if not self._is_private(record.alias)]

    async def _views_for(
        self, subject: Subject, sql: str, pinned: Mapping[str, str]
    ) -> list[DatasetView]:
        """The datasets ``sql`` names (as ``odfd sql`` finds them: by alias in its text), each at
        its pinned block when there is one."""
        lowered = sql.lower()
        views = []
        for record in await self._readable(subject):
            if record.alias.lower() not in lowered:
                continue
            block = pinned.get(record.alias)
            view = await self._view(record, _block_hash(block) if block else None)
            if block is not None and str(view.head) != block:
                raise QueryFailedError(
                    f"dataset '{record.alias}' no longer holds block {block} the query was "
                    "planned at (its history was reset or compacted); run the query again"
                )
            views.append(view)
        return views

    async def _view(self, record: DatasetRecord, block: Multihash | None = None) -> DatasetView:
        """What the dataset holds at ``block`` (default: its head), read once per head."""
        at = block or record.head
        cached = self._views.get(record.id)
        if cached is not None and at is not None and cached.head == at:
            return cached.view
        dataset = self._workspace.open_dataset(record.id)
        try:
            view = await dataset_view(dataset, pinned_block=at)
        except OdfError as err:
            raise DataUnavailableError(f"dataset '{record.alias}' cannot be read: {err}") from None
        if block is None or block == record.head:
            self._views[record.id] = _Cached(view.head, view)
        return view


class _Stream:
    """A running query; the time limit counts the engine's time, not the client's reading."""

    def __init__(self, query: StreamingQuery, time_limit: float, remaining: float) -> None:
        self._query = query
        self._time_limit = time_limit
        self._remaining = remaining
        self._closed = False

    @property
    def schema(self) -> pa.Schema:
        return self._query.schema

    async def start(self) -> None:
        await self._engine(asyncio.to_thread(self._query.start))

    async def next_batch(self) -> pa.RecordBatch | None:
        if self._closed:
            raise QueryFailedError("the query was closed")
        return await self._engine(self._query.next_batch())

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(self._query.close)

    async def _engine(self, work: Awaitable[T]) -> T:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            return await asyncio.wait_for(work, max(self._remaining, 0.0))
        except TimeoutError:
            await self.close()
            raise QueryTimeoutError(
                f"the query ran past its time limit of {self._time_limit:g} s and was stopped"
            ) from None
        except QueryExecutionError as err:
            raise QueryFailedError(str(err)) from None
        finally:
            self._remaining -= loop.time() - started


def _block_hash(text: str) -> Multihash:
    try:
        return Multihash.from_multibase(text)
    except ParseError:
        raise InvalidQueryError(f"the query pins {text!r}, which is no block hash") from None


def _plan_key(subject: Subject, sql: str, pinned: Mapping[str, str]) -> _PlanKey:
    return (subject.may_read_private, sql, tuple(sorted(pinned.items())))


def _streaming_query(sql: str, views: Sequence[DatasetView]) -> StreamingQuery:
    tables = [QueryTable(view.alias, view.paths, view.schema) for view in views]
    try:
        return StreamingQuery([SqlQueryStep(query=sql)], tables)
    except engine_errors.InvalidQueryError as err:
        unknown = _UNKNOWN_TABLE.search(str(err))
        if unknown:
            raise UnknownTableError(
                f"table '{unknown.group(1)}' not found: no dataset of that alias (names are "
                'case-sensitive; quote them, e.g. "alice/trades")'
            ) from None
        raise InvalidQueryError(str(err).removeprefix("query is invalid: ")) from None
    except engine_errors.TransformError as err:  # a table's files cannot be read
        raise DataUnavailableError(str(err)) from None


async def serve(
    workspace: Workspace, config: ServerConfig, *, address: str, port: int
) -> FlightSqlEndpoint:
    """A Flight SQL server on ``address:port`` over ``workspace``, with ``config``'s tokens,
    private datasets and query time limit."""
    return await endpoint.start(
        WorkspaceQueries(workspace, config.is_private),
        address=address,
        port=port,
        read_tokens=config.read_tokens,
        admin_tokens=config.admin_tokens,
        time_limit=config.query_timeout,
    )
