"""Signed heads over HTTP, beside ``refs/head`` (``docs/signed-heads.md``).

``GET /{dataset}/refs/head.sig`` serves the dataset's ``refs/head.sig`` document as stored (404
when the dataset is unsigned here). ``PUT /{dataset}/refs/head.sig`` hands this server a newer
document: a pusher sends it after its push (or alone, to refresh a heartbeat). The server keeps
it only if it verifies against the dataset's id, names this server's current head and is newer
than the one it holds, so it never serves a statement that does not match what it serves.
Both work for the Simple and the Smart Transfer Protocol; servers without them (the
reference's) answer 404, which clients read as "unsigned".
"""

from __future__ import annotations

from aiohttp import web

from odfd.server.simple import DATASET
from odfd.server.state import STATE_KEY
from protocol.transfer.signed_head import (
    MAX_DOCUMENT_BYTES,
    SIGNATURE_REF,
    SignedHeadError,
    parse_signed_head,
)
from storage.layout import HEAD_REF

PATH = f"/{DATASET}/refs/{SIGNATURE_REF}"


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, get_signed_head)
    app.router.add_route("PUT", PATH, put_signed_head)


async def get_signed_head(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    record = await state.require(request.match_info["dataset"])
    document = await state.workspace.open_dataset(record.id).refs.get_signature(HEAD_REF)
    if document is None:
        raise web.HTTPNotFound(text=f"dataset {record.alias} has no signed head here")
    return web.Response(
        body=document, headers={"Cache-Control": "no-cache", "Content-Type": "application/json"}
    )


async def put_signed_head(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    if await state.pusher(request) is None:
        raise web.HTTPUnauthorized(
            text="storing a signed head needs a push token (Authorization: Bearer …)"
        )
    record = await state.require(request.match_info["dataset"])
    body = await request.content.read(MAX_DOCUMENT_BYTES + 1)
    where = f"signed head for {record.alias}"
    try:
        signed = parse_signed_head(body, where)
    except SignedHeadError as err:
        raise web.HTTPBadRequest(text=str(err)) from None
    if signed.dataset_id != record.id:
        raise web.HTTPBadRequest(
            text=f"{where}: it is signed for {signed.dataset_id}, not {record.id}"
        )
    dataset = state.workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if signed.head != head:
        raise web.HTTPConflict(
            text=f"{where}: it names head {signed.head}, this server's head is {head}"
        )
    current = await state.workspace.signed_heads.get(record.id)
    if current is not None and not signed.is_newer_than(current.signed):
        if current.signed.same_statement(signed):
            return web.Response(status=204)
        raise web.HTTPConflict(
            text=f"{where}: signed at {signed.signed_at}, not newer than the one held "
            f"(signed at {current.signed.signed_at})"
        )
    await dataset.refs.set_signature(HEAD_REF, signed.document())
    await state.workspace.signed_heads.record(signed, "push")
    return web.Response(status=204)
