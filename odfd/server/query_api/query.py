"""``GET|POST /query`` and ``POST /verify``."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from odfd.app import answers
from odfd.app.request_json import json_body
from odfd.server.query_api import context
from protocol.query import (
    QueryRequest,
    ResponseSigningNotConfigured,
    VerifyRequest,
)

JSON = "application/json"

_log = logging.getLogger(__name__)


async def get_query(request: web.Request) -> web.StreamResponse:
    return await _answer(request, QueryRequest.from_query_params(request.query.items()))


async def post_query(request: web.Request) -> web.StreamResponse:
    body = await _json_body(request, 'a JSON object such as {"query": "select 1"}')
    return await _answer(request, QueryRequest.from_json(body))


async def _json_body(request: web.Request, expected: str) -> Any:
    """The request's body parsed as JSON (``odfd.app.request_json``)."""
    return json_body(await request.read(), f"{request.method} {request.path}", expected)


async def _answer(request: web.Request, query: QueryRequest) -> web.StreamResponse:
    """Streamed: the status is decided once the first piece of the body is rendered (the engine
    still producing the rest). A small answer is one response written at once (headers and
    body in one send). A query that fails after the first piece was sent ends the body early
    (the client reads a truncated body, never a complete-looking one)."""
    node = context.node(request)
    signer = answers.node_signer(node) if query.wants_proof else None
    if query.wants_proof and signer is None:
        raise ResponseSigningNotConfigured()
    result = await answers.execute(
        node,
        query,
        visible=context.visible(request),
        limits=context.limits(request),
        stream_after=answers.SMALL_ANSWER_VALUES,
    )
    if result.is_small:
        return web.Response(body=result.render(signer), headers={"Content-Type": JSON})
    pieces = answers.body_stream(result, signer)
    try:
        first = await anext(pieces)
        response = web.StreamResponse(headers={"Content-Type": JSON})
        await response.prepare(request)
        await response.write(first)
        try:
            async for piece in pieces:
                await response.write(piece)
        except answers.AnswerError as error:
            _log.warning("%s %s: the answer was cut short: %s", request.method, request.path, error)
            if request.transport is not None:
                request.transport.close()  # what was sent goes out; the body's end never does
            return response
        await response.write_eof()
        return response
    finally:
        await pieces.aclose()


async def post_verify(request: web.Request) -> web.Response:
    body = await _json_body(request, "the answer to check: a /query answer with its input")
    verify = VerifyRequest.from_json(body)
    result = await answers.verify(
        context.node(request),
        verify,
        visible=context.visible(request),
        limits=context.limits(request),
    )
    return web.json_response(result.to_json(), status=result.status)
