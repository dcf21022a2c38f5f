"""SQL over the node's datasets (``odfd sql``, the console's SQL box): each dataset a query
names is a table under its alias, pinned to a block or a time when asked, run in the engine the
caller chose (DataFusion by default, in-process; Spark through the node's configured session).
A ``Projection`` resource it names is a table too: its current result (``odfd.app.projections``).
``query_inputs`` is the one registration every query surface uses."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.app.projections import ProjectedTable, ProjectionError, Projections, ProjectionSpec
from odfd.app.query_tables import read_aliases
from odfd.coordinator.query import AsOf, DatasetView, dataset_view, resolve_as_of
from protocol.model import SqlQueryStep
from verifier.engine.contract import QueryTable
from verifier.engine.errors import InvalidQueryError

if TYPE_CHECKING:
    import pyarrow as pa

    from odfd.app.node import Node
    from protocol.identity import Multihash
    from protocol.model import Timestamp
    from storage.catalog import DatasetRecord
    from verifier.engine.registry import Engines

DEFAULT_ENGINE = "datafusion"


@dataclass(frozen=True, slots=True)
class QueryInputs:
    """What a query reads, registered the same way by every query surface (``odfd sql``, the
    console, the HTTP query API, Flight SQL): each dataset it names under its alias, and each
    ``Projection`` it names under its name, as its result over its inputs."""

    views: tuple[DatasetView, ...]
    projections: tuple[ProjectedTable, ...] = ()

    def tables(self) -> list[tuple[QueryTable, str]]:
        """Each table with what identifies its content (the block a dataset is read at, a
        projection's result file); a dataset that did not exist yet (AS OF) is no table."""
        datasets = [(query_table(view), str(view.head)) for view in self.views if view.head]
        return datasets + [(projected.table, projected.version) for projected in self.projections]

    def datasets(self) -> list[DatasetView]:
        """Every dataset read, by the query or through a projection, once each, with data."""
        seen: dict[str, DatasetView] = {}
        for view in [*self.views, *(v for p in self.projections for v in p.inputs)]:
            if view.head is not None:
                seen.setdefault(view.alias, view)
        return list(seen.values())


async def query(
    node: Node,
    sql: str,
    *,
    engine: str = DEFAULT_ENGINE,
    block: Multihash | None = None,
    time: Timestamp | None = None,
    visible: Callable[[DatasetRecord], bool] | None = None,
) -> pa.Table:
    """The result of ``sql`` over the datasets and projections it names (of those ``visible``
    allows), as of ``block`` or ``time`` when given."""
    inputs = await query_inputs(node, sql, engine=engine, block=block, time=time, visible=visible)
    projected = [projected.table for projected in inputs.projections]
    try:
        return await asyncio.to_thread(
            run_query, node.engines, sql, list(inputs.views), engine, projected
        )
    except InvalidQueryError as error:
        hint = table_hint(str(error), await _visible_records(node, visible))
        if hint is None:
            raise
        raise InvalidQueryError(f"{error}; {hint}") from error


_UNKNOWN_TABLE = re.compile(r"table '([^']*)' not found")
"""DataFusion's planning error for a name no table has (catalog and schema included)."""


def unknown_table(message: str) -> str | None:
    """The name, as the engine read it (catalog and schema included), of the table an engine
    error says it did not find; ``None`` for any other error."""
    found = _UNKNOWN_TABLE.search(message)
    return None if found is None else found.group(1)


def unknown_table_hint(message: str, aliases: Iterable[str]) -> str | None:
    """What to write instead, when the engine found no table of a name that is a dataset's
    alias written without its double quotes (DataFusion reads ``match.scores`` as schema
    ``match``, table ``scores``, and ``Alice`` as ``alice``): ``did you mean "match.scores"?``.
    ``aliases`` are those the caller may read: the hint never names another."""
    name = unknown_table(message)
    if name is None:
        return None
    by_folded = {alias.casefold(): alias for alias in aliases}
    parts = name.split(".")
    for start in range(len(parts)):  # with the catalog and schema, then without
        written = ".".join(parts[start:])
        alias = by_folded.get(written.casefold())
        if alias is not None and (written != alias or start < 2):  # not already one table name
            quoted = '"' + alias.replace('"', '""') + '"'
            return f"did you mean {quoted}? {QUOTES_HINT}"
    return None


QUOTES_HINT = "(dataset names go in double quotes)"
"""The end of ``unknown_table_hint``'s words."""

_KAMU_PREFIXES = ("kamu.kamu", "odf.kamu")
"""Where a query written for kamu-cli names a table: its catalog and schema (``kamu.kamu.x``),
or its schema alone, which the engine puts in odfd's catalog (``kamu.x``)."""


def table_hint(message: str, aliases: Iterable[str]) -> str | None:
    """What to write instead of the table an engine error says it did not find: the quoted
    alias (``unknown_table_hint``), or the alias without kamu-cli's catalog and schema
    (``kamu.kamu."x"``; Flight SQL's words). ``aliases`` are those the caller may read."""
    aliases = list(aliases)
    hint = unknown_table_hint(message, aliases)
    name = unknown_table(message)
    if hint is not None or name is None:
        return hint
    return kamu_prefix_hint(name, aliases)


def kamu_prefix_hint(name: str, aliases: Iterable[str]) -> str | None:
    """The dataset a table ``name`` (as the engine read it) means when a query written for
    kamu-cli puts it under kamu's catalog and schema (``kamu.kamu."x"``, or ``kamu."x"``), in
    the words every way of querying uses; ``aliases`` are those the caller may read."""
    for alias in aliases:
        if name.removesuffix("." + alias) in _KAMU_PREFIXES:
            quoted = '"' + alias.replace('"', '""') + '"'
            return (
                "the datasets are tables of catalog odf, schema odf (kamu-cli's are both named "
                f"kamu); did you mean {quoted}? (or odf.odf.{quoted})"
            )
    return None


def has_table_hint(message: str) -> bool:
    """Whether ``message`` carries ``table_hint``'s words already (an odfd node's query API
    gives them; a client asking it adds none)."""
    return "did you mean " in message


async def query_inputs(
    node: Node,
    sql: str,
    *,
    engine: str = DEFAULT_ENGINE,
    block: Multihash | None = None,
    time: Timestamp | None = None,
    visible: Callable[[DatasetRecord], bool] | None = None,
    pinned: Sequence[DatasetView] | None = None,
) -> QueryInputs:
    """The tables ``sql`` reads (``odfd.app.query_tables``, in ``engine``'s dialect): of the
    datasets ``visible`` allows, at their heads or as of ``block``/``time``, or exactly the
    ``pinned`` views (under their aliases); and the projections whose every input is one of
    those, computed over the same views of their inputs."""
    if pinned is None:
        records = await _visible_records(node, visible)
        views = await _views(node, sql, records, engine, block, time)
        readable: Collection[str] = records.keys()
    else:
        records, views, readable = {}, list(pinned), {view.alias for view in pinned}
    projected = await projected_tables(
        node,
        sql,
        readable,
        engine=engine,
        views={view.alias: view for view in views},
        open_view=lambda alias: _open_view(node, records[alias], block, time),
    )
    return QueryInputs(tuple(views), tuple(projected))


async def projected_tables(
    node: Node,
    sql: str,
    readable: Collection[str],
    *,
    engine: str = DEFAULT_ENGINE,
    views: Mapping[str, DatasetView] | None = None,
    open_view: Callable[[str], Awaitable[DatasetView]] | None = None,
) -> list[ProjectedTable]:
    """The results of the ``Projection``s ``sql`` names, of those whose every input is one of
    the ``readable`` dataset aliases (a projection is readable by exactly who may read all its
    inputs), over ``views`` of their inputs (by alias; else ``open_view``'s, else each at its
    head)."""
    projections = Projections(node)
    named = await projections.named(readable)
    if not named:
        return []
    dialect = (await asyncio.to_thread(node.engines.named, engine)).sql_dialect
    found = []
    for name in read_aliases(sql, dialect, named):
        given = dict(views or {})
        if open_view is not None:
            for alias in ProjectionSpec.from_record(named[name]).inputs:
                if alias not in given:
                    given[alias] = await open_view(alias)
        found.append(await projections.table(named[name], given))
    return found


async def readable_projections(node: Node, readable: Collection[str]) -> list[ProjectedTable]:
    """Every projection whose inputs are all among ``readable``, at their inputs' heads (a table
    list's rows; one that cannot be computed now is left out, its status says why)."""
    projections = Projections(node)
    found = []
    for record in (await projections.named(readable)).values():
        try:
            found.append(await projections.table(record))
        except ProjectionError:
            continue
    return found


async def _visible_records(
    node: Node, visible: Callable[[DatasetRecord], bool] | None
) -> dict[str, DatasetRecord]:
    return {
        record.alias: record
        for record in await node.workspace.list_datasets()
        if visible is None or visible(record)
    }


async def _open_view(
    node: Node, record: DatasetRecord, block: Multihash | None, time: Timestamp | None
) -> DatasetView:
    dataset = node.workspace.open_dataset(record.id)
    return await dataset_view(dataset, pinned_block=block, pinned_time=time)


async def pinned_at(node: Node, as_of: str | None) -> tuple[Multihash | None, Timestamp | None]:
    """The block or the time ``as_of`` (``--as-of BLOCK|TIME``) pins datasets at; neither when
    it is ``None``."""
    if as_of is None:
        return None, None
    return await resolve_as_of(node.workspace, AsOf.parse(as_of))


async def _views(
    node: Node,
    sql: str,
    records: Mapping[str, DatasetRecord],
    engine: str,
    block: Multihash | None,
    time: Timestamp | None,
) -> list[DatasetView]:
    # in a worker thread: the engine's first use imports its library
    dialect = (await asyncio.to_thread(node.engines.named, engine)).sql_dialect
    return [
        await _open_view(node, records[alias], block, time)
        for alias in read_aliases(sql, dialect, records)
    ]


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
