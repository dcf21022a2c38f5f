"""``GET|POST /query`` and ``POST /verify``."""

from __future__ import annotations

from aiohttp import web

from odfd.app import answers
from odfd.server.query_api import context
from protocol.query import QueryRequest, VerifyRequest

JSON = "application/json"


async def get_query(request: web.Request) -> web.Response:
    return await _answer(request, QueryRequest.from_query_params(request.query.items()))


async def post_query(request: web.Request) -> web.Response:
    return await _answer(request, QueryRequest.from_json_body(await request.read()))


async def _answer(request: web.Request, query: QueryRequest) -> web.Response:
    node = context.node(request)
    signer = answers.node_signer(node) if query.wants_proof else None
    body = await answers.answer(
        node,
        query,
        signer=signer,
        visible=context.visible(request),
        limits=context.limits(request),
    )
    return web.Response(body=body, content_type=JSON)


async def post_verify(request: web.Request) -> web.Response:
    verify = VerifyRequest.from_json_body(await request.read())
    result = await answers.verify(
        context.node(request),
        verify,
        visible=context.visible(request),
        limits=context.limits(request),
    )
    return web.json_response(result.to_json(), status=result.status)
