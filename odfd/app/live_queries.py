"""SQL over the node's datasets for a server that answers many small queries (Flight SQL): the
use case of :mod:`odfd.app.query` (each dataset a table under its alias, only those the
authorization decision lets the caller read, DataFusion; a ``Projection`` whose every input they
may read, under its name, as ``odfd.app.query`` registers it), with its tables kept between queries.

Callers who may read the same datasets share one DataFusion session in which every one of them is
registered (a few sessions serve every anonymous client and every account); before a query plans,
the catalog's heads are compared with what is registered and only datasets that moved are read
and registered again. A query then costs its planning and execution, not a session and a chain
walk per dataset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from odfd.app.authorization import Action, Policy, PolicyCache, Principal
from odfd.app.live_plan import InvalidSqlError, LivePlan
from odfd.app.projections import ProjectedTable, ProjectionError
from odfd.app.query import projected_tables, query_table, readable_projections
from odfd.coordinator.query import dataset_view
from odfd.errors import OdfdError
from protocol.errors import OdfError
from storage.lru import Lru
from verifier.engine.datafusion.session import PlannedQuery, QuerySession
from verifier.engine.errors import InvalidQueryError, TransformError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.config import ServerConfig
    from protocol.identity import DatasetAliasPattern, Multihash
    from storage.catalog.records import DatasetRecord

_MAX_SESSIONS = 32
"""Distinct sets of readable datasets kept (each a DataFusion session); the least recently used
goes when more callers with different views arrive."""


@dataclass(frozen=True, slots=True)
class LiveTable:
    """A dataset as a table: its alias and the schema a query sees (empty before any data)."""

    name: str
    schema: pa.Schema


class LiveQueries:
    """Queries over ``node``'s datasets as they are when each query plans."""

    def __init__(self, node: Node, settings: Callable[[], ServerConfig] | None = None) -> None:
        """``settings``: where the server's current settings are read (a daemon's reload changes
        its private datasets); default: ``node``'s."""
        self._node = node
        self._settings = settings or (lambda: node.config.server)
        self._policies = PolicyCache(
            node.workspace, lambda alias: self._settings().is_private(alias)
        )
        self._sessions: Lru[frozenset[str], _Kept] = Lru(_MAX_SESSIONS)
        self._listed: tuple[tuple[int, int], list[DatasetRecord]] | None = None
        self._views: dict[Principal, frozenset[str]] = {}
        self._views_of: tuple[tuple[int, int], Policy, tuple[DatasetAliasPattern, ...]] | None = (
            None
        )

    async def tables(self, subject: Principal) -> Sequence[LiveTable]:
        """The datasets ``subject`` may read, as tables."""
        kept, records = await self._kept(subject)
        projected = await readable_projections(self._node, [record.alias for record in records])
        async with kept.lock:
            await self._refresh(kept, records)
            found = [*kept.schemas.values(), *(_projection_table(p) for p in projected)]
            return sorted(found, key=lambda table: table.name)

    async def plan(
        self, sql: str, subject: Principal, parameters: Mapping[str, Any] | None = None
    ) -> LivePlan:
        """``sql`` planned over the datasets the caller may read, at their heads now (raises
        :class:`~odfd.app.live_plan.InvalidSqlError` for SQL that does not plan,
        :class:`UnreadableDatasetError` for a query that names a dataset whose files or metadata
        cannot be read)."""
        try:
            return LivePlan(await self._plan(sql, subject, parameters))
        except InvalidQueryError as err:
            raise InvalidSqlError(str(err)) from None
        except TransformError as err:
            raise UnreadableDatasetError(str(err)) from None

    async def _plan(
        self, sql: str, subject: Principal, parameters: Mapping[str, Any] | None
    ) -> PlannedQuery:
        kept, records = await self._kept(subject)
        try:
            projected = await projected_tables(
                self._node, sql, [record.alias for record in records]
            )
        except ProjectionError as err:
            raise UnreadableDatasetError(str(err)) from None
        async with kept.lock:
            await self._refresh(kept, records)
            for table in projected:  # off the loop: registering reads the file's footer
                if kept.session.version(table.table.name) != table.version:
                    await asyncio.to_thread(kept.session.register, table.table, table.version)
            try:
                return kept.session.plan(sql, parameters)
            except InvalidQueryError:
                for alias, reason in kept.broken.items():
                    if alias.lower() in sql.lower():
                        raise UnreadableDatasetError(
                            f"dataset '{alias}' cannot be read: {reason}"
                        ) from None
                raise

    def close(self) -> None:
        for kept in self._sessions.values():
            kept.session.close()

    async def _kept(self, subject: Principal) -> tuple[_Kept, list[DatasetRecord]]:
        """The session of the datasets ``subject`` may read now, and their records."""
        workspace = self._node.workspace
        marker = await workspace.catalog.change_marker()
        if self._listed is None or self._listed[0] != marker:
            self._listed = (marker, await workspace.list_datasets())
        records = self._listed[1]
        policy = await self._policies.policy()
        private = self._settings().private
        seen = self._views_of
        if seen is None or seen[0] != marker or seen[1] is not policy or seen[2] != private:
            self._views, self._views_of = {}, (marker, policy, private)
        visible = self._views.get(subject)
        if visible is None:
            visible = self._views[subject] = frozenset(
                record.alias
                for record in records
                if policy.decide(subject, Action.READ, record.alias).allowed
            )
        kept = self._sessions.get(visible)
        if kept is None:
            full = len(self._sessions) >= _MAX_SESSIONS
            evicted = self._sessions.oldest() if full else None
            kept = _Kept(QuerySession())
            self._sessions.put(visible, kept)  # forgets ``evicted``
            if evicted is not None:
                async with evicted.lock:
                    evicted.session.close()
        return kept, [record for record in records if record.alias in visible]

    async def _refresh(self, kept: _Kept, records: list[DatasetRecord]) -> None:
        """Registers the datasets whose head moved since they were registered; forgets the
        ones that are gone (or are no longer readable)."""
        workspace = self._node.workspace
        marker = await workspace.catalog.change_marker()
        if marker == kept.marker:
            return
        aliases = {record.alias for record in records}
        for name in (kept.session.names | kept.broken.keys()) - aliases:
            kept.session.deregister(name)
            kept.schemas.pop(name, None)
            kept.broken.pop(name, None)
            kept.versions.pop(name, None)
        for record in records:
            if record.alias in kept.versions and kept.versions[record.alias] == record.head:
                continue
            kept.versions[record.alias] = record.head
            try:
                view = await dataset_view(workspace.open_dataset(record.id))
                # off the loop: registering reads the files' footers
                await asyncio.to_thread(kept.session.register, query_table(view), str(view.head))
            except (OdfError, TransformError) as err:  # other tables stay queryable
                kept.session.deregister(record.alias)
                kept.schemas.pop(record.alias, None)
                kept.broken[record.alias] = str(err)
                continue
            kept.broken.pop(record.alias, None)
            kept.schemas[record.alias] = LiveTable(record.alias, view.schema or pa.schema([]))
        kept.marker = marker


def _projection_table(projected: ProjectedTable) -> LiveTable:
    """A projection as a listed table: its name and its result's schema."""
    import pyarrow.parquet as pq

    return LiveTable(projected.table.name, pq.read_schema(projected.table.paths[0]))


class UnreadableDatasetError(OdfdError):
    """A query names a dataset whose blocks or files cannot be read on this node now."""


@dataclass
class _Kept:
    """A session and what was registered in it."""

    session: QuerySession
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    versions: dict[str, Multihash | None] = field(default_factory=dict)
    """Alias -> the catalog's head when last registered (or found unreadable)."""
    schemas: dict[str, LiveTable] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    """Alias -> why the dataset cannot be read."""
    marker: tuple[int, int] | None = None
    """The catalog's change marker when the session was last brought up to date."""
