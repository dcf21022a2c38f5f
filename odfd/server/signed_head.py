"""Signed heads over HTTP, beside ``refs/head`` (``docs/signed-heads.md``).

``GET /{dataset}/refs/head.sig`` serves the dataset's ``refs/head.sig`` document as stored (404
when the dataset is unsigned here). ``PUT /{dataset}/refs/head.sig`` hands this server a newer
document: a pusher sends it after its push (or alone, to refresh a heartbeat). The server keeps
it only if it verifies against the dataset's id, names this server's current head and is newer
than the one it holds, so it never serves a statement that does not match what it serves.
The server only translates: ``odfd.app.signed_heads`` reads and checks the documents. Both work
for the Simple and the Smart Transfer Protocol; servers without them (the
reference's) answer 404, which clients read as "unsigned".
"""

from __future__ import annotations

from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.signed_heads import (
    InvalidSignedHeadError,
    StaleSignedHeadError,
    head_signature,
    store_signed_head,
)
from odfd.server.simple import DATASET
from odfd.server.state import STATE_KEY
from protocol.transfer.signed_head import MAX_DOCUMENT_BYTES, SIGNATURE_REF

PATH = f"/{DATASET}/refs/{SIGNATURE_REF}"


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, get_signed_head)
    app.router.add_route("PUT", PATH, put_signed_head)


async def get_signed_head(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    record = await state.require(request.match_info["dataset"], request)
    document = await head_signature(state.workspace, record)
    if document is None:
        raise web.HTTPNotFound(text=f"dataset {record.alias} has no signed head here")
    return web.Response(
        body=document, headers={"Cache-Control": "no-cache", "Content-Type": "application/json"}
    )


async def put_signed_head(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    if state.principal(request).account is None:
        raise web.HTTPUnauthorized(
            text="storing a signed head needs a bearer token (Authorization: Bearer …)"
        )
    record = await state.require(request.match_info["dataset"])
    decision = state.decide(request, Action.WRITE, record.alias)
    if not decision.allowed:
        raise (web.HTTPForbidden if decision.visible else web.HTTPNotFound)(
            text=f"{state.principal(request).label} may not store a signed head of "
            f"{record.alias}: {decision.reason}"
        )
    body = await request.content.read(MAX_DOCUMENT_BYTES + 1)
    try:
        await store_signed_head(state.workspace, record, body)
    except InvalidSignedHeadError as err:
        raise web.HTTPBadRequest(text=str(err)) from None
    except StaleSignedHeadError as err:
        raise web.HTTPConflict(text=str(err)) from None
    return web.Response(status=204)
