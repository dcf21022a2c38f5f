"""The Flight SQL server's :class:`~odfd.flight_sql.service.QueryService` over a node: the
application layer's live queries (:mod:`odfd.app.live_queries`, the use case ``odfd sql`` runs,
with its tables kept between queries), its errors as the service's; the node's tokens as the
server resolves them, and the node's version its caches are kept by
(:class:`odfd.app.catalog_version.CatalogVersion`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from odfd.app.accounts import issued_token, token_expired
from odfd.app.authorization import principal_of
from odfd.app.catalog_version import CatalogVersion
from odfd.app.live_plan import InvalidSqlError, LivePlan, LiveStream, QueryRunError
from odfd.app.live_queries import LiveQueries, UnreadableDatasetError
from odfd.app.query import kamu_prefix_hint, unknown_table, unknown_table_hint
from odfd.config import ServerConfig
from odfd.flight_sql import endpoint
from odfd.flight_sql.auth import Grant, TokenExpired, TokenResolver
from odfd.flight_sql.catalog import CATALOG, DB_SCHEMA
from odfd.flight_sql.endpoint import FlightSqlEndpoint
from odfd.flight_sql.parameters import parameter_schema
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

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.workspace import Workspace

T = TypeVar("T")


class NodeQueries:
    """Queries over ``node``'s datasets, as :class:`LiveQueries` answers them."""

    def __init__(self, node: Node, settings: Callable[[], ServerConfig] | None = None) -> None:
        self._live = LiveQueries(node, settings)

    async def tables(self, subject: Subject) -> Sequence[TableInfo]:
        tables = await self._live.tables(subject)
        return [TableInfo(table.name, table.schema) for table in tables]

    async def plan(
        self, subject: Subject, sql: str, parameters: Mapping[str, Any] | None = None
    ) -> PlannedQuery:
        query = await self._planned(subject, sql, parameters)
        placeholders = parameter_schema(sql, query.placeholder_types())
        return PlannedQuery(sql, query.schema, placeholders, engine=query)

    async def execute(
        self,
        subject: Subject,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        time_limit: float,
        planned: PlannedQuery | None = None,
    ) -> _Stream:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + time_limit
        if planned is not None and isinstance(planned.engine, LivePlan):
            live = planned.engine
        else:
            live = await self._planned(subject, sql, parameters)
        streaming = live.stream()
        stream = _Stream(streaming, time_limit, deadline - loop.time())
        try:
            await stream.start()
        except BaseException:
            await stream.close()
            raise
        return stream

    def close(self) -> None:
        self._live.close()

    async def _planned(
        self, subject: Subject, sql: str, parameters: Mapping[str, Any] | None
    ) -> LivePlan:
        try:
            return await self._live.plan(sql, subject, parameters)
        except InvalidSqlError as err:
            unknown = unknown_table(str(err))
            if unknown is not None:
                readable = [table.name for table in await self._live.tables(subject)]
                hint = unknown_table_hint(str(err), readable)
                if hint is not None:  # a schema the engine read into the name shows the mistake
                    name = unknown.removeprefix(f"{CATALOG}.{DB_SCHEMA}.")
                    raise UnknownTableError(
                        f"table '{name}' not found: {hint}", suggested=True
                    ) from None
                meant = kamu_prefix_hint(unknown, readable)
                if meant is not None:
                    raise UnknownTableError(
                        f"table '{unknown}' not found: {meant}", suggested=True
                    ) from None
                raise UnknownTableError(
                    f"table '{_unqualified(unknown)}' not found: no dataset of that alias (names "
                    'are case-sensitive; quote them, e.g. "alice/trades")'
                ) from None
            raise InvalidQueryError(str(err).removeprefix("query is invalid: ")) from None
        except UnreadableDatasetError as err:
            raise DataUnavailableError(str(err)) from None


class _Stream:
    """A running query; the time limit counts the engine's time, not the client's reading."""

    def __init__(self, query: LiveStream, time_limit: float, remaining: float) -> None:
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
            self._query.close()

    async def _engine(self, work: Awaitable[T]) -> T:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(max(self._remaining, 0.0)):  # no task per batch
                return await work
        except TimeoutError:
            await self.close()
            raise QueryTimeoutError(
                f"the query ran past its time limit of {self._time_limit:g} s and was stopped"
            ) from None
        except QueryRunError as err:
            raise QueryFailedError(str(err)) from None
        finally:
            self._remaining -= loop.time() - started


async def serve(
    node: Node,
    *,
    address: str,
    port: int,
    current: Callable[[], Node] | None = None,
) -> FlightSqlEndpoint:
    """A Flight SQL server on ``address:port`` over ``node``: its callers are the subjects of
    the node's tokens (issued account tokens and the ``[server]`` lists) and, unless
    ``[server] flight_sql_allow_anonymous`` is false, anonymous sessions; what they see is the
    authorization decision's, with the node's query time limit. ``current`` gives the node
    whose ``[server]`` settings (tokens, private datasets, time limit, anonymous sessions)
    apply at each call (a daemon's reload swaps it); default: ``node``'s, fixed."""
    now = current or (lambda: node)

    def settings() -> ServerConfig:
        return now().config.server

    version = await CatalogVersion.open(node.workspace, settings)
    try:
        return await endpoint.start(
            NodeQueries(node, settings),
            address=address,
            port=port,
            resolve=token_resolver(node.workspace, settings),
            time_limit=lambda: settings().query_timeout,
            version=version,
            release=version.close,
            allow_anonymous=lambda: settings().flight_sql_allow_anonymous,
        )
    except BaseException:
        await version.close()
        raise


def token_resolver(
    workspace: Workspace, config: ServerConfig | Callable[[], ServerConfig]
) -> TokenResolver:
    """A bearer token's subject as every server of the node establishes it (``config``: the
    server's settings, or where to read them at each call), and an issued token's expiry."""
    settings = config if callable(config) else lambda: config

    async def resolve(token: str) -> Grant | None:
        subject = await principal_of(workspace, settings(), token)
        if subject is None:
            if await token_expired(workspace, token):
                raise TokenExpired
            return None
        if subject.via != "token":  # a [server] list token: it lives as long as the list
            return Grant(subject)
        record = await issued_token(workspace, token)
        return None if record is None else Grant(subject, record.expires_at)

    return resolve


def _unqualified(name: str) -> str:
    """``name`` without the catalog and schema the engine read into it (up to two leading
    parts, never the last)."""
    parts = name.split(".")
    return ".".join(parts[min(2, len(parts) - 1) :])
