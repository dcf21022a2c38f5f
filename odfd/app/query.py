"""SQL over the node's datasets (``odfd sql``, the console's SQL box): each dataset a query
names is a table under its alias, pinned to a block or a time when asked, run in the engine the
caller chose (DataFusion by default, in-process; Spark through the node's configured session).
A ``Projection`` resource it names is a table too: its current result (``odfd.app.projections``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from odfd.app.projections import Projections
from odfd.app.query_tables import read_aliases
from odfd.coordinator.query import AsOf, DatasetView, dataset_view, resolve_as_of
from protocol.model import SqlQueryStep
from verifier.engine.contract import QueryTable

if TYPE_CHECKING:
    import pyarrow as pa

    from odfd.app.node import Node
    from protocol.identity import Multihash
    from protocol.model import Timestamp
    from storage.catalog import DatasetRecord
    from verifier.engine.registry import Engines

DEFAULT_ENGINE = "datafusion"


async def query(
    node: Node,
    sql: str,
    *,
    engine: str = DEFAULT_ENGINE,
    block: Multihash | None = None,
    time: Timestamp | None = None,
    visible: Callable[[DatasetRecord], bool] | None = None,
) -> pa.Table:
    """The result of ``sql`` over the datasets it names (of those ``visible`` allows), as of
    ``block`` or ``time`` when given."""
    views = await referenced_views(
        node, sql, engine=engine, block=block, time=time, visible=visible
    )
    projected = await projection_tables(node, sql, engine=engine, visible=visible)
    return await asyncio.to_thread(run_query, node.engines, sql, views, engine, projected)


async def projection_tables(
    node: Node,
    sql: str,
    *,
    engine: str = DEFAULT_ENGINE,
    visible: Callable[[DatasetRecord], bool] | None = None,
) -> list[QueryTable]:
    """The results of the ``Projection``s the query names (of those whose inputs it may see)."""
    records = {
        record.alias: record
        for record in await node.workspace.list_datasets()
        if visible is None or visible(record)
    }
    projections = Projections(node)
    named = await projections.named(records)
    if not named:
        return []
    dialect = (await asyncio.to_thread(node.engines.named, engine)).sql_dialect
    return [await projections.table(named[name]) for name in read_aliases(sql, dialect, named)]


async def pinned_at(node: Node, as_of: str | None) -> tuple[Multihash | None, Timestamp | None]:
    """The block or the time ``as_of`` (``--as-of BLOCK|TIME``) pins datasets at; neither when
    it is ``None``."""
    if as_of is None:
        return None, None
    return await resolve_as_of(node.workspace, AsOf.parse(as_of))


async def referenced_views(
    node: Node,
    sql: str,
    *,
    engine: str = DEFAULT_ENGINE,
    block: Multihash | None = None,
    time: Timestamp | None = None,
    visible: Callable[[DatasetRecord], bool] | None = None,
) -> list[DatasetView]:
    """The views of the datasets the query reads as tables, parsed in the dialect of ``engine``
    (``odfd.app.query_tables``)."""
    workspace = node.workspace
    records = {
        record.alias: record
        for record in await workspace.list_datasets()
        if visible is None or visible(record)
    }
    # in a worker thread: the engine's first use imports its library
    dialect = (await asyncio.to_thread(node.engines.named, engine)).sql_dialect
    views = []
    for alias in read_aliases(sql, dialect, records):
        dataset = workspace.open_dataset(records[alias].id)
        views.append(await dataset_view(dataset, pinned_block=block, pinned_time=time))
    return views


def run_query(
    engines: Engines,
    sql: str,
    views: list[DatasetView],
    engine: str = DEFAULT_ENGINE,
    extra: list[QueryTable] | None = None,
) -> pa.Table:
    """Runs ``sql`` in the engine named ``engine`` with each dataset registered under its alias
    (and the ``extra`` tables, e.g. projections); blocking."""
    tables = [  # a dataset that did not exist yet (AS OF) is no table at all
        query_table(view) for view in views if view.head is not None
    ]
    return engines.named(engine).query([SqlQueryStep(query=sql)], [*tables, *(extra or [])])


def query_table(view: DatasetView) -> QueryTable:
    """The table a query reads for a dataset: its files under its alias, with its schema."""
    return QueryTable(view.alias, view.paths, view.schema)
