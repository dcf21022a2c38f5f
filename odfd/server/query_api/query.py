"""``GET|POST /query`` and ``POST /verify``."""

from __future__ import annotations

from aiohttp import web

from odfd.app import answers
from odfd.server.query_api import context
from protocol.query import QueryRequest, ResponseSigningNotConfigured, VerifyRequest

JSON = "application/json"


async def get_query(request: web.Request) -> web.StreamResponse:
    return await _answer(request, QueryRequest.from_query_params(request.query.items()))


async def post_query(request: web.Request) -> web.StreamResponse:
    return await _answer(request, QueryRequest.from_json_body(await request.read()))


async def _answer(request: web.Request, query: QueryRequest) -> web.StreamResponse:
    """Streamed: the status is decided once the first piece of the body is rendered. A small
    answer is one response written at once (headers and body in one send)."""
    node = context.node(request)
    signer = answers.node_signer(node) if query.wants_proof else None
    if query.wants_proof and signer is None:
        raise ResponseSigningNotConfigured()
    result = await answers.execute(
        node, query, visible=context.visible(request), limits=context.limits(request)
    )
    if result.is_small:
        return web.Response(body=result.render(signer), headers={"Content-Type": JSON})
    pieces = answers.body_stream(result, signer)
    first = await anext(pieces)
    response = web.StreamResponse(headers={"Content-Type": JSON})
    await response.prepare(request)
    await response.write(first)
    async for piece in pieces:
        await response.write(piece)
    await response.write_eof()
    return response


async def post_verify(request: web.Request) -> web.Response:
    verify = VerifyRequest.from_json_body(await request.read())
    result = await answers.verify(
        context.node(request),
        verify,
        visible=context.visible(request),
        limits=context.limits(request),
    )
    return web.json_response(result.to_json(), status=result.status)
