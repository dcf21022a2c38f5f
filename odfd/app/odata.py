"""The node's datasets as OData collections (``/odata``, what Excel, Power BI and Tableau read):
which datasets a caller sees as collections, each with its schema and last update, and the
entries an OData request asks for.

Collections are the datasets the caller may read (the query API's ``visible``), named by their
dataset name within an account (``/odata/{account}/...``) or without one (``/odata/...``), as
the reference names them. Rows are read through the query API's engine session
(``odfd.app.answers``) with the dataset pinned at the head its schema and update time came
from, so one answer never mixes two states of a dataset."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from odfd.app import answers
from odfd.app.odata_query import (
    DEFAULT_TOP,
    BadODataRequestError,
    ODataNotFoundError,
    QueryOptions,
    UnknownPropertyError,
    collection_sql,
    count_sql,
)
from protocol.identity import DatasetAlias
from protocol.query import DatasetState, QueryRequest

if TYPE_CHECKING:
    from collections.abc import Collection

    from odfd.app.answers import QueryLimits, Visible
    from odfd.app.node import Node
    from protocol.identity import Multihash
    from protocol.model import Timestamp
    from storage.catalog import DatasetRecord


@dataclass(frozen=True, slots=True)
class ODataCollection:
    """A dataset as an OData collection, at one head."""

    name: str
    """The dataset name (the account, if any, is the service's, not the collection's)."""
    record: DatasetRecord
    head: Multihash | None
    schema: pa.Schema
    """The dataset's schema at ``head`` (empty before its first ``SetDataSchema``)."""
    offset: str
    """The offset column: each entry's key."""
    updated: Timestamp | None
    """The system time of the head block (every entry's ``<updated>``)."""


@dataclass(frozen=True, slots=True)
class ODataRows:
    schema: pa.Schema
    batches: tuple[pa.RecordBatch, ...]
    next_skip: int | None = None
    """Where the next page starts, when the node chose the page size (no ``$top``) and more
    entries follow: what the feed's ``next`` link asks for."""
    count: int | None = None
    """How many entries ``$filter`` matches, when ``$inlinecount=allpages`` asks."""


def collection_name(record: DatasetRecord, account: str | None) -> str | None:
    """The record's name as a collection of ``account``'s service (``None``: another's);
    account names are case-insensitive, as every ODF name."""
    alias = DatasetAlias.parse(record.alias)
    owner = None if alias.account_name is None else str(alias.account_name).lower()
    wanted = None if account is None else account.lower()
    return str(alias.dataset_name) if owner == wanted else None


async def collections(node: Node, visible: Visible, account: str | None) -> list[ODataCollection]:
    """The datasets of ``account`` (``None``: those without one) the caller may read, by name;
    those without a schema yet are left out (the reference lists one as an entity type keyed
    by a property it does not have, which clients such as ``pyodata`` refuse as invalid)."""
    found = []
    for record in await node.workspace.list_datasets():
        name = collection_name(record, account)
        if name is not None and visible(record):
            collection = await _collection(node, record, name)
            if len(collection.schema) > 0:
                found.append(collection)
    return sorted(found, key=lambda collection: collection.name)


async def collection(
    node: Node, visible: Visible, account: str | None, name: str
) -> ODataCollection:
    """The collection ``name`` (case-insensitive) of ``account``'s service;
    ``ODataNotFoundError`` when there is none the caller may read (a private dataset does not
    exist for it)."""
    for record in await node.workspace.list_datasets():
        found = collection_name(record, account)
        if found is not None and found.lower() == name.lower() and visible(record):
            return await _collection(node, record, found)
    where = "" if account is None else f" of account {account}"
    raise ODataNotFoundError(f"no collection {name}{where} on this node")


async def has_account(node: Node, visible: Visible, account: str) -> bool:
    """Whether ``account`` owns a dataset the caller may read (its service exists)."""
    return any(
        collection_name(record, account) is not None and visible(record)
        for record in await node.workspace.list_datasets()
    )


async def _collection(node: Node, record: DatasetRecord, name: str) -> ODataCollection:
    from verifier.engine.columns import Vocab
    from verifier.engine.inputs import arrow_schema_of

    dataset = node.workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if head is None:
        return ODataCollection(name, record, None, pa.schema([]), Vocab().offset, None)
    state = await dataset.chain.state(head)
    schema = arrow_schema_of(state.schema) if state.schema is not None else pa.schema([])
    offset = Vocab.of(state.vocab).offset
    return ODataCollection(name, record, head, schema, offset, state.system_time)


async def rows(
    node: Node,
    collection: ODataCollection,
    options: QueryOptions,
    key: int | None,
    *,
    properties: Collection[str],
    limits: QueryLimits,
) -> ODataRows:
    """The entries ``options`` ask for (or the one of offset ``key``) over the collection's
    ``properties`` (the columns OData shows; options naming others are refused), with the key column
    ``KEY_ALIAS`` last; without ``$top``, a page of ``DEFAULT_TOP`` (or of the node's row cap,
    when lower) and where the next starts. A dataset without data is no collection to read, as
    in the reference."""
    from verifier.engine.datafusion.engine import quote_identifier

    _readable(collection)
    page = min(DEFAULT_TOP, limits.max_rows)
    try:
        sql = collection_sql(
            options,
            collection.record.alias,
            properties,
            collection.offset,
            key,
            quote_identifier,
            page,
        )
    except UnknownPropertyError as error:
        raise _left_out(error, collection) from None
    if options.top is not None and options.top > limits.max_rows:
        raise answers.QueryRefusedError(
            f"$top={options.top} is above this node's cap of {limits.max_rows} rows per query "
            "([server] query_max_rows); page through the collection with $skip and $top"
        )
    # The row past a page only tells whether another follows: it is never served, so it may
    # be one past the cap.
    probe = replace(limits, max_rows=max(limits.max_rows, page + 1))
    schema, batches = await _run(node, collection, sql, probe if options.top is None else limits)
    matching = None
    if options.inline_count and key is None:
        unpaged = replace(options, skip=0, top=None)
        matching = await count(node, collection, unpaged, properties=properties, limits=limits)
    found = sum(batch.num_rows for batch in batches)
    if options.top is not None or key is not None or found <= page:
        return ODataRows(schema, batches, None, matching)
    served = pa.Table.from_batches(batches, schema).slice(0, page)
    return ODataRows(schema, tuple(served.to_batches()), options.skip + page, matching)


async def count(
    node: Node,
    collection: ODataCollection,
    options: QueryOptions,
    *,
    properties: Collection[str],
    limits: QueryLimits,
) -> int:
    """How many entries ``$filter`` matches, of those ``$skip`` and ``$top`` leave
    (``/{collection}/$count``)."""
    from verifier.engine.datafusion.engine import quote_identifier

    _readable(collection)
    try:
        sql = count_sql(options, collection.record.alias, properties, quote_identifier)
    except UnknownPropertyError as error:
        raise _left_out(error, collection) from None
    _, batches = await _run(node, collection, sql, limits)
    return options.paged(int(batches[0].column(0)[0].as_py()))


def _left_out(error: UnknownPropertyError, collection: ODataCollection) -> BadODataRequestError:
    """``error``, saying why when the name is a column the entity leaves out (a type OData 3.0
    has none for: decimals, lists, structs...) rather than no column at all."""
    if error.name not in collection.schema.names:
        return error
    kind = collection.schema.field(error.name).type
    return BadODataRequestError(
        f"{error.option}: column {error.name!r} ({kind}) has no OData 3.0 type, so the entity "
        f"leaves it out (the entity has {error.known}; GET /query reads every column)"
    )


def _readable(collection: ODataCollection) -> None:
    if collection.head is None or len(collection.schema) == 0:
        raise ODataNotFoundError(f"collection {collection.name} has no data yet")


async def _run(
    node: Node, collection: ODataCollection, sql: str, limits: QueryLimits
) -> tuple[pa.Schema, tuple[pa.RecordBatch, ...]]:
    """``sql`` over the collection's dataset pinned at its head, within the node's limits."""
    pinned = DatasetState(collection.record.id, collection.record.alias, collection.head)
    request = QueryRequest(sql, datasets=(pinned,), limit=limits.max_rows)
    try:
        answer = await answers.execute(node, request, limits=limits)
    except (answers.BadQueryError, answers.QueryFailedError) as error:
        raise BadODataRequestError(
            f"the request cannot be answered over {collection.name}: {error}"
        ) from None
    return answer.schema, answer.batches
