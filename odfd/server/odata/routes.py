"""The OData handlers: each translates a request into a call of ``odfd.app.odata`` and its
result into the reference's XML, or OData's verbose JSON when the client asks for it
(``formats``). Errors are OData's error document in the answer's format (``errors``) with the
reference's status: 404 for a collection or entry the caller cannot see, 400 for a malformed
option or key, 501 for an OData feature this node does not implement."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from aiohttp import web
from yarl import URL

from odfd.app import odata
from odfd.app.odata_query import (
    BadODataRequestError,
    ODataError,
    ODataNotFoundError,
    UnsupportedODataError,
)
from odfd.server.odata import atom, csdl, edm, errors, verbose_json
from odfd.server.odata.formats import wants_json
from odfd.server.odata.query_options import parse_address, parse_options
from odfd.server.query_api import context
from odfd.server.query_api.errors import Handler, json_errors

MEDIA_TYPE_XML = "application/xml;charset=utf-8"
MEDIA_TYPE_ATOM = "application/atom+xml;type=feed;charset=utf-8"
"""The reference's content types (an entry document is sent with the feed's, as there)."""
MEDIA_TYPE_TEXT = "text/plain;charset=utf-8"
MEDIA_TYPE_JSON = errors.MEDIA_TYPE_JSON
_STATUS = ((ODataNotFoundError, 404), (BadODataRequestError, 400), (UnsupportedODataError, 501))


def odata_errors(handler: Handler) -> Handler:
    """``handler`` with OData's errors answered with their status, the query API's with theirs
    (``json_errors``), each as OData's error document."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        if context.NODE_KEY not in request.app:
            return errors.error_response(
                request, 404, "this server does not serve the query API, which OData reads through"
            )
        try:
            return await handler(request)
        except ODataError as error:
            status = next(code for kind, code in _STATUS if isinstance(error, kind))
            return errors.error_response(request, status, str(error))

    answered = json_errors(guarded)

    async def shaped(request: web.Request) -> web.StreamResponse:
        response = await answered(request)
        if response.status < 400 or errors.VERSION_HEADER in response.headers:
            return response
        assert isinstance(response, web.Response) and isinstance(response.body, bytes)
        message = json.loads(response.body)["message"]  # the query API's error (json_errors)
        return errors.error_response(request, response.status, message)

    return shaped


async def service(request: web.Request) -> web.StreamResponse:
    account = request.match_info.get("account")
    if account is not None and not await odata.has_account(
        context.node(request), context.visible(request), account
    ):
        raise ODataNotFoundError(f"no account {account} with datasets on this node")
    return await _service(request, account)


async def metadata(request: web.Request) -> web.StreamResponse:
    account = request.match_info.get("account")
    found = await odata.collections(context.node(request), context.visible(request), account)
    return _answer(csdl.metadata_document(found), MEDIA_TYPE_XML, errors.METADATA_VERSION)


async def collection(request: web.Request) -> web.StreamResponse:
    """``/odata/{name}``, ``/odata/{name}(key)`` and the same under an account; a bare
    ``/odata/{account}`` that names no collection is that account's service document."""
    account = request.match_info.get("account")
    segment = request.match_info["collection"]
    node, visible = context.node(request), context.visible(request)
    address = parse_address(segment)
    try:
        found = await odata.collection(node, visible, account, address.name)
    except ODataNotFoundError:
        if (
            account is None
            and address.key is None
            and await odata.has_account(node, visible, segment)
        ):
            return await _service(request, segment)
        raise
    options = parse_options(request.query)
    json = wants_json(request.query, request.headers)
    limits = context.limits(request)
    properties = edm.properties(found.schema)
    rows = await odata.rows(node, found, options, address.key, properties=properties, limits=limits)
    base = _base(request, account)
    if address.key is None:
        next_url = None
        if rows.next_skip is not None:
            query = {**request.query, "$skip": str(rows.next_skip)}
            next_url = str(URL(f"{base}/{found.name}").with_query(query))
        count = sum(batch.num_rows for batch in rows.batches)
        if json:
            pieces = verbose_json.feed(base, found, rows, next_url, atom.PIECE_ROWS)
            return await _feed(request, pieces, count, MEDIA_TYPE_JSON)
        return await _feed(request, atom.feed(base, found, rows, next_url), count, MEDIA_TYPE_ATOM)
    if sum(batch.num_rows for batch in rows.batches) != 1:
        raise ODataNotFoundError(f"no entry {found.name}({address.key}) on this node")
    if json:
        return _answer(verbose_json.entry(base, found, rows), MEDIA_TYPE_JSON)
    return _answer(atom.entry(base, found, rows), MEDIA_TYPE_ATOM)


async def count(request: web.Request) -> web.StreamResponse:
    """``/odata/{name}/$count``: how many entries the options leave, as plain text."""
    account = request.match_info.get("account")
    node, visible = context.node(request), context.visible(request)
    found = await odata.collection(node, visible, account, request.match_info["collection"])
    options = parse_options(request.query)
    properties = edm.properties(found.schema)
    matching = await odata.count(
        node, found, options, properties=properties, limits=context.limits(request)
    )
    return _answer(str(matching), MEDIA_TYPE_TEXT)


async def _service(request: web.Request, account: str | None) -> web.StreamResponse:
    json = wants_json(request.query, request.headers)
    found = await odata.collections(context.node(request), context.visible(request), account)
    if json:
        return _answer(verbose_json.service_document(found), MEDIA_TYPE_JSON)
    return _answer(csdl.service_document(_base(request, account), found), MEDIA_TYPE_XML)


def _base(request: web.Request, account: str | None) -> str:
    """The service's URL as the client reaches it (``[server] base_url`` behind a proxy)."""
    root = context.state(request).config.base_url or f"{request.url.origin()}/"
    return f"{root}odata" if account is None else f"{root}odata/{account}"


async def _feed(
    request: web.Request, pieces: Iterator[str], count: int, content_type: str
) -> web.StreamResponse:
    """A feed of ``count`` entries, rendered off the event loop: whole, with its length, when it
    is one piece; else sent piece by piece (a feed of the node's row cap would be hundreds of
    megabytes held at once)."""
    if count <= atom.PIECE_ROWS:
        return _answer(await asyncio.to_thread("".join, pieces), content_type)
    response = web.StreamResponse(
        headers={"Content-Type": content_type, errors.VERSION_HEADER: errors.DATA_VERSION}
    )
    await response.prepare(request)
    while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
        await response.write(piece.encode())
    await response.write_eof()
    return response


def _answer(text: str, content_type: str, version: str = errors.DATA_VERSION) -> web.Response:
    """A whole document (XML, JSON or a count's text) with its own content type and the OData
    version it is written in."""
    return web.Response(
        body=text.encode(), headers={"Content-Type": content_type, errors.VERSION_HEADER: version}
    )


ROUTES = (
    ("/odata", service),
    ("/odata/", service),
    ("/odata/$metadata", metadata),
    ("/odata/{collection}/$count", count),
    ("/odata/{account}/{collection}/$count", count),
    ("/odata/{collection}", collection),
    ("/odata/{account}/", service),
    ("/odata/{account}/$metadata", metadata),
    ("/odata/{account}/$metadata/", metadata),
    ("/odata/{account}/{collection}", collection),
    ("/odata/{account}/{collection}/", collection),
)
"""The reference's routes, single- and multi-tenant, with the trailing slashes its multi-tenant
router also takes; and OData's ``$count`` of a collection, which it lacks."""
