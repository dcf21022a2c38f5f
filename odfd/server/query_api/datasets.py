"""``GET /{dataset}/tail``, ``GET /{dataset}/metadata`` and ``GET /datasets/{id}``."""

from __future__ import annotations

import asyncio

from aiohttp import web

from odfd.app import answers
from odfd.app.dataset_metadata import DEFAULT_ASPECTS, Aspect
from odfd.app.dataset_metadata import metadata as dataset_metadata
from odfd.app.resources import DEFAULT_ACCOUNT, account_handle
from odfd.server.query_api import context
from odfd.server.query_api.errors import error_response
from protocol.errors import ParseError
from protocol.identity import DatasetAlias, DatasetId
from protocol.query import QueryRequest, RequestError, SchemaFormat
from storage.catalog import DatasetRecord

JSON = "application/json"
_TAIL_PARAMS = ("skip", "limit", "dataFormat", "schemaFormat")


async def tail(request: web.Request) -> web.StreamResponse:
    record = await _dataset(request)
    if record is None:
        return _no_dataset(request)
    params = [(name, value) for name, value in request.query.items() if name in _TAIL_PARAMS]
    options = QueryRequest.from_query_params([("query", ""), *params])
    answer = await answers.tail(
        context.node(request),
        record,
        skip=options.skip,
        limit=options.limit,
        data_format=options.data_format,
        schema_format=options.schema_format,
        limits=context.limits(request),
    )
    return web.Response(body=await asyncio.to_thread(answer.render_output), content_type=JSON)


async def metadata(request: web.Request) -> web.StreamResponse:
    record = await _dataset(request)
    if record is None:
        return _no_dataset(request)
    aspects, schema_format = DEFAULT_ASPECTS, SchemaFormat.ARROW_JSON
    for name, value in request.query.items():
        if name == "include":
            aspects = _aspects(value)
        elif name == "schemaFormat":
            parsed = QueryRequest.from_query_params([("query", ""), ("schemaFormat", value)])
            schema_format = parsed.schema_format or schema_format
        else:
            raise RequestError(
                name, f"unknown field `{name}`, expected `include` or `schemaFormat`"
            )
    output = await dataset_metadata(context.node(request), record, aspects, schema_format)
    return web.json_response({"output": output})


async def dataset_info(request: web.Request) -> web.StreamResponse:
    try:
        dataset_id = DatasetId.parse(request.match_info["id"])
    except ParseError as error:
        return error_response(400, f"Invalid URL: {error}")
    record = await context.state(request).find(str(dataset_id), request)
    if record is None:
        return error_response(404, "Not Found")
    alias = DatasetAlias.parse(record.alias)
    account = alias.account_name or DEFAULT_ACCOUNT
    return web.json_response(
        {
            "id": str(record.id),
            "owner": {"accountName": str(account), "accountId": account_handle(account).id},
            "datasetName": str(alias.dataset_name),
        }
    )


async def _dataset(request: web.Request) -> DatasetRecord | None:
    return await context.state(request).find(request.match_info["dataset"], request)


def _no_dataset(request: web.Request) -> web.Response:
    return error_response(404, f"Dataset not found: {request.match_info['dataset']}")


def _aspects(text: str) -> frozenset[Aspect]:
    names = {aspect.value.lower(): aspect for aspect in Aspect}
    chosen = set()
    for item in text.split(",") if text else []:
        aspect = names.get(item.strip().lower())
        if aspect is None:
            raise RequestError("include", f"Matching variant not found: {item!r}")
        chosen.add(aspect)
    return frozenset(chosen)
