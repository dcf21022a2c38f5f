"""The resolvers of ``/graphql``: each field's arguments turned into a call of the application
layer (``odfd.app.graphql_catalog``, ``graphql_chain``, ``graphql_data``) and its result into
the objects the schema's fields read. A dataset's ``data``, ``metadata`` and ``chain`` objects
are its catalog record; other objects are model values or plain dicts, whose fields the
default resolver reads by their GraphQL names."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError, GraphQLResolveInfo

from odfd.app import graphql_catalog as catalog
from odfd.app import graphql_chain as chain
from odfd.app import graphql_data as data
from odfd.server.graphql import auth, datasets, flows
from odfd.server.graphql.identifiers import dataset_id, multihash
from protocol.identity import Multihash
from storage.catalog import DatasetRecord

if TYPE_CHECKING:
    from odfd.app.answers import QueryLimits, Visible
    from odfd.app.dataset_details import SummaryCache
    from odfd.app.graphql_datasets import Caller
    from odfd.app.node import Node
    from odfd.server.query_api.platform import LoginThrottle
    from protocol.model import MetadataBlock, SetDataSchema

API_VERSION = "0.1"
"""The reference's ``apiVersion``."""
DEFAULT_PER_PAGE = {"search": 15, "datasets": 15, "blocks": 20}
"""Page sizes when a query gives none, as the reference's."""
DEFAULT_TAIL_LIMIT = 20
DEFAULT_QUERY_LIMIT = 100
"""Rows of a ``tail`` and of a ``data.query`` that give no ``limit``, as the reference's; data
and schema formats default to its ``JSON`` and ``PARQUET``."""


@dataclass(frozen=True, slots=True)
class Context:
    """What one request's resolvers share: the node, who may read what, the query limits."""

    node: Node
    visible: Visible
    """Whether the request may read a dataset (the query API's rule)."""
    public: Visible
    """Whether anyone may read it, without a token."""
    limits: QueryLimits
    summaries: SummaryCache
    throttle: LoginThrottle
    """``POST /platform/login``'s: a name's failed sign-ins slow it down on both routes."""
    caller: Caller
    """Who asks and what the node's policy lets them change (the ``datasets`` mutations)."""


Resolver = Callable[..., Any]


def _ctx(info: GraphQLResolveInfo) -> Context:
    context: Context = info.context
    return context


def _page_args(kind: str, page: int | None, per_page: int | None) -> tuple[int, int]:
    page = 0 if page is None else page
    per_page = DEFAULT_PER_PAGE[kind] if per_page is None else per_page
    if page < 0:
        raise GraphQLError(f"page must be 0 or more, not {page}")
    if per_page < 1:
        raise GraphQLError(f"perPage must be 1 or more, not {per_page}")
    return page, per_page


def connection(items: Sequence[Any], total: int, page: int, per_page: int) -> dict[str, Any]:
    """A page-based connection: ``items`` are the page's, of ``total``."""
    return {
        "nodes": list(items),
        "edges": [{"node": item} for item in items],
        "totalCount": total,
        "pageInfo": {
            "hasPreviousPage": page > 0,
            "hasNextPage": (page + 1) * per_page < total,
            "currentPage": page,
            "totalPages": math.ceil(total / per_page),
        },
    }


def _paged(items: Sequence[Any], page: int, per_page: int) -> dict[str, Any]:
    start = page * per_page
    return connection(items[start : start + per_page], len(items), page, per_page)


# --- Query ----------------------------------------------------------------------------------------


def _group(_source: Any, _info: GraphQLResolveInfo) -> dict[str, Any]:
    """``datasets``, ``accounts``, ``search``, ``data``: groups of fields without state."""
    return {}


async def _search(
    _source: Any, info: GraphQLResolveInfo, query: str, page: int | None = None, **kw: Any
) -> dict[str, Any]:
    page, per_page = _page_args("search", page, kw.get("perPage"))
    ctx = _ctx(info)
    return _paged(await catalog.search(ctx.node, ctx.visible, query), page, per_page)


async def _by_id(_source: Any, info: GraphQLResolveInfo, datasetId: str) -> DatasetRecord | None:
    ctx = _ctx(info)
    return await catalog.by_id(ctx.node, ctx.visible, dataset_id(datasetId))


async def _by_owner_and_name(
    _source: Any,
    info: GraphQLResolveInfo,
    accountName: str,
    datasetName: str,
) -> DatasetRecord | None:
    ctx = _ctx(info)
    return await catalog.by_owner_and_name(ctx.node, ctx.visible, accountName, datasetName)


async def _by_account_name(
    _source: Any,
    info: GraphQLResolveInfo,
    accountName: str,
    **kw: Any,
) -> dict[str, Any]:
    page, per_page = _page_args("datasets", kw.get("page"), kw.get("perPage"))
    ctx = _ctx(info)
    return _paged(await catalog.by_account(ctx.node, ctx.visible, accountName), page, per_page)


async def _by_account_id(
    _source: Any,
    info: GraphQLResolveInfo,
    accountId: str,
    **kw: Any,
) -> dict[str, Any]:
    page, per_page = _page_args("datasets", kw.get("page"), kw.get("perPage"))
    ctx = _ctx(info)
    account = await catalog.account_by_id(ctx.node, ctx.visible, accountId)
    found = [] if account is None else await catalog.by_account(ctx.node, ctx.visible, account.name)
    return _paged(found, page, per_page)


async def _account_by_name(
    _source: Any, info: GraphQLResolveInfo, name: str
) -> catalog.AccountFacts | None:
    ctx = _ctx(info)
    return await catalog.account_by_name(ctx.node, ctx.visible, name)


async def _account_by_id(
    _source: Any,
    info: GraphQLResolveInfo,
    accountId: str,
) -> catalog.AccountFacts | None:
    ctx = _ctx(info)
    return await catalog.account_by_id(ctx.node, ctx.visible, accountId)


async def _data_query(_source: Any, info: GraphQLResolveInfo, **args: Any) -> Any:
    ctx = _ctx(info)
    return await data.query(
        ctx.node,
        ctx.visible,
        args["query"],
        dialect=args["queryDialect"],
        skip=_at_least(args, "skip", 0, 0),
        limit=_at_least(args, "limit", DEFAULT_QUERY_LIMIT, 0),
        data_format=args.get("dataFormat") or "JSON",
        schema_format=args.get("schemaFormat") or "PARQUET",
        limits=ctx.limits,
    )


def _at_least(args: dict[str, Any], name: str, default: int, minimum: int) -> int:
    value = args.get(name)
    value = default if value is None else value
    if value < minimum:
        raise GraphQLError(f"{name} must be {minimum} or more, not {value}")
    assert isinstance(value, int)
    return value


# --- Account --------------------------------------------------------------------------------------


def _account_field(name: str) -> Resolver:
    def resolve(source: catalog.AccountFacts, _info: GraphQLResolveInfo) -> Any:
        return {
            "id": source.id,
            "accountName": source.name,
            "displayName": source.display_name,
            "accountType": "USER",
            "avatarUrl": source.avatar_url,
            "isAdmin": source.is_admin,
        }[name]

    return resolve


# --- Dataset --------------------------------------------------------------------------------------


def _itself(source: DatasetRecord, _info: GraphQLResolveInfo) -> DatasetRecord:
    return source


async def _owner(source: DatasetRecord, info: GraphQLResolveInfo) -> catalog.AccountFacts:
    return await catalog.owner(_ctx(info).node, source)


def _visibility(source: DatasetRecord, info: GraphQLResolveInfo) -> dict[str, Any]:
    if _ctx(info).public(source):
        return {"__typename": "PublicDatasetVisibility", "anonymousAvailable": True}
    return {"__typename": "PrivateDatasetVisibility", "dummy": None}


def _head(source: DatasetRecord, _info: GraphQLResolveInfo) -> Multihash:
    if source.head is None:
        raise GraphQLError(f"dataset {source.alias} has no head yet")
    return source.head


async def _created_at(source: DatasetRecord, info: GraphQLResolveInfo) -> Any:
    return (await chain.timeline(_ctx(info).node, source)).created


async def _updated_at(source: DatasetRecord, info: GraphQLResolveInfo) -> Any:
    return (await chain.timeline(_ctx(info).node, source)).updated


async def _records_total(source: DatasetRecord, info: GraphQLResolveInfo) -> int:
    ctx = _ctx(info)
    return (await chain.data_summary(ctx.node, source, ctx.summaries)).records


async def _size(source: DatasetRecord, info: GraphQLResolveInfo) -> int:
    ctx = _ctx(info)
    return (await chain.data_summary(ctx.node, source, ctx.summaries)).size


async def _tail(source: DatasetRecord, info: GraphQLResolveInfo, **args: Any) -> Any:
    ctx = _ctx(info)
    return await data.tail(
        ctx.node,
        source,
        skip=_at_least(args, "skip", 0, 0),
        limit=_at_least(args, "limit", DEFAULT_TAIL_LIMIT, 0),
        data_format=args.get("dataFormat") or "JSON",
        schema_format=args.get("schemaFormat") or "PARQUET",
        limits=ctx.limits,
    )


async def _current_schema(
    source: DatasetRecord, info: GraphQLResolveInfo, format: str | None = None
) -> dict[str, Any] | None:
    chosen = format or "PARQUET"
    content = await chain.current_schema(_ctx(info).node, source, data.SCHEMA_FORMATS[chosen])
    return None if content is None else {"format": chosen, "content": content}


async def _current_watermark(source: DatasetRecord, info: GraphQLResolveInfo) -> Any:
    return await chain.current_watermark(_ctx(info).node, source)


async def _dependencies(
    source: DatasetRecord, info: GraphQLResolveInfo, *, downstream: bool
) -> list[dict[str, Any]]:
    """The reference's ``DependencyDatasetResult``s: a dataset the caller may read, or the id of
    an input this node does not hold (``Not Accessible``, the reference's word)."""
    ctx = _ctx(info)
    found = await chain.dependencies(ctx.node, ctx.visible, source, downstream=downstream)
    return [
        {"__typename": "DependencyDatasetResultAccessible", "dataset": item, "message": "Found"}
        if isinstance(item, DatasetRecord)
        else {
            "__typename": "DependencyDatasetResultNotAccessible",
            "id": str(item),
            "message": "Not Accessible",
        }
        for item in found
    ]


async def _upstream(source: DatasetRecord, info: GraphQLResolveInfo) -> list[dict[str, Any]]:
    return await _dependencies(source, info, downstream=False)


async def _downstream(source: DatasetRecord, info: GraphQLResolveInfo) -> list[dict[str, Any]]:
    return await _dependencies(source, info, downstream=True)


def _source_field(name: str) -> Resolver:
    async def resolve(source: DatasetRecord, info: GraphQLResolveInfo) -> Any:
        found = await chain.current_sources(_ctx(info).node, source)
        return {
            "currentPollingSource": found.polling,
            "currentPushSources": found.push,
            "currentTransform": found.transform,
            "currentVocab": found.vocab,
        }[name]

    return resolve


def _summary_field(name: str) -> Resolver:
    """Info, license and readme: the newest of each in the chain (the cached summary)."""

    async def resolve(source: DatasetRecord, info: GraphQLResolveInfo) -> Any:
        ctx = _ctx(info)
        summary = await chain.data_summary(ctx.node, source, ctx.summaries)
        if name == "currentInfo":
            keywords = list(summary.keywords) or None
            return {"description": summary.description, "keywords": keywords}
        return summary.license if name == "currentLicense" else summary.readme

    return resolve


async def _refs(source: DatasetRecord, info: GraphQLResolveInfo) -> list[dict[str, Any]]:
    found = await chain.refs(_ctx(info).node, source)
    return [{"name": name, "blockHash": block_hash} for name, block_hash in found]


async def _blocks(source: DatasetRecord, info: GraphQLResolveInfo, **kw: Any) -> dict[str, Any]:
    page, per_page = _page_args("blocks", kw.get("page"), kw.get("perPage"))
    found = await chain.block_page(_ctx(info).node, source, page, per_page)
    nodes = [_block(block_hash, block) for block_hash, block in found.blocks]
    return connection(nodes, found.total, page, per_page)


async def _block_by_hash(
    source: DatasetRecord, info: GraphQLResolveInfo, hash: str
) -> dict[str, Any] | None:
    block_hash = multihash(hash)
    block = await chain.block_by_hash(_ctx(info).node, source, block_hash)
    return None if block is None else _block(block_hash, block)


def _block(block_hash: Multihash, block: MetadataBlock) -> dict[str, Any]:
    return {
        "blockHash": block_hash,
        "prevBlockHash": block.prev_block_hash,
        "systemTime": block.system_time,
        "event": block.event,
        "sequenceNumber": block.sequence_number,
    }


# --- events and results ---------------------------------------------------------------------------


def _dataset_kind(source: Any, _info: GraphQLResolveInfo) -> str:
    kind = source.kind if isinstance(source, DatasetRecord) else source.dataset_kind
    return str(kind.name)


def _queries(source: Any, _info: GraphQLResolveInfo) -> list[dict[str, Any]]:
    """A transform's steps; a transform of one ``query`` is one step without alias."""
    if source.queries:
        return [{"alias": step.alias, "query": step.query} for step in source.queries]
    return [{"alias": None, "query": source.query or ""}]


def _event_schema(source: SetDataSchema, _info: GraphQLResolveInfo) -> dict[str, Any]:
    content = chain.schema_text(source, data.SCHEMA_FORMATS["PARQUET"])
    return {"format": "PARQUET", "content": content}


def _success_field(name: str) -> Resolver:
    def resolve(source: data.DataResult, _info: GraphQLResolveInfo) -> Any:
        if name == "schema":
            return {"format": source.schema_format, "content": source.schema}
        if name == "data":
            return {
                "format": source.data_format,
                "content": source.data,
                "numRecords": source.num_records,
            }
        if name == "datasets":
            return [{"id": i, "alias": a, "blockHash": h} for i, a, h in source.datasets]
        return source.limit

    return resolve


RESOLVERS: dict[str, Resolver] = {
    "Query.apiVersion": lambda _source, _info: API_VERSION,
    "Query.datasets": _group,
    "Query.accounts": _group,
    "Query.search": _group,
    "Query.data": _group,
    "Mutation.auth": _group,
    "Mutation.datasets": _group,
    **datasets.RESOLVERS,
    **flows.resolvers(connection),
    "AuthMut.login": auth.login,
    "AuthMut.accountDetails": auth.account_details,
    "Search.query": _search,
    "Datasets.byId": _by_id,
    "Datasets.byOwnerAndName": _by_owner_and_name,
    "Datasets.byAccountName": _by_account_name,
    "Datasets.byAccountId": _by_account_id,
    "Accounts.byName": _account_by_name,
    "Accounts.byId": _account_by_id,
    "DataQueries.query": _data_query,
    **{
        f"Account.{name}": _account_field(name)
        for name in ("id", "accountName", "displayName", "accountType", "avatarUrl", "isAdmin")
    },
    "Dataset.id": lambda source, _info: str(source.id),
    "Dataset.name": lambda source, _info: catalog.dataset_name(source),
    "Dataset.alias": lambda source, _info: source.alias,
    "Dataset.owner": _owner,
    "Dataset.kind": _dataset_kind,
    "Dataset.visibility": _visibility,
    "Dataset.head": _head,
    "Dataset.data": _itself,
    "Dataset.metadata": _itself,
    "Dataset.createdAt": _created_at,
    "Dataset.lastUpdatedAt": _updated_at,
    "DatasetData.numRecordsTotal": _records_total,
    "DatasetData.estimatedSize": _size,
    "DatasetData.estimatedSizeBytes": _size,
    "DatasetData.tail": _tail,
    "DatasetMetadata.chain": _itself,
    "DatasetMetadata.currentSchema": _current_schema,
    "DatasetMetadata.currentWatermark": _current_watermark,
    "DatasetMetadata.currentUpstreamDependencies": _upstream,
    "DatasetMetadata.currentDownstreamDependencies": _downstream,
    **{
        f"DatasetMetadata.{name}": _source_field(name)
        for name in (
            "currentPollingSource",
            "currentPushSources",
            "currentTransform",
            "currentVocab",
        )
    },
    **{
        f"DatasetMetadata.{name}": _summary_field(name)
        for name in ("currentInfo", "currentLicense", "currentReadme")
    },
    "MetadataChain.refs": _refs,
    "MetadataChain.blocks": _blocks,
    "MetadataChain.blockByHash": _block_by_hash,
    "Seed.datasetKind": _dataset_kind,
    "TransformSql.queries": _queries,
    "SetDataSchema.schema": _event_schema,
    "DataQueryResultError.errorKind": lambda _source, _info: "INVALID_SQL",
    "DataQueryResultError.errorMessage": lambda source, _info: source.message,
    **{
        f"DataQueryResultSuccess.{name}": _success_field(name)
        for name in ("schema", "data", "datasets", "limit")
    },
}

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def default_field(source: Any, info: GraphQLResolveInfo, **_args: Any) -> Any:
    """A dict's key, or a model object's attribute (``newData`` is ``new_data``)."""
    if isinstance(source, dict):
        return source.get(info.field_name)
    return getattr(source, _CAMEL.sub("_", info.field_name).lower(), None)


def type_name(value: Any, _info: GraphQLResolveInfo, _abstract: Any) -> str:
    """The object type of a union member: a dict names it; a dataset is a ``Dataset``; a query
    result its kind; an event or transform its model class (the schema's names are the
    model's)."""
    if isinstance(value, dict):
        return str(value["__typename"])
    if isinstance(value, DatasetRecord):
        return "Dataset"
    if isinstance(value, data.DataResult):
        return "DataQueryResultSuccess"
    if isinstance(value, data.InvalidSql):
        return "DataQueryResultError"
    return type(value).__name__
