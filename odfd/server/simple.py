"""Simple Transfer Protocol routes (read-only, RFC-007), signed object uploads, and the listing.

``GET|HEAD /{dataset}/refs/head``, ``/{dataset}/blocks/{hash}``, ``/{dataset}/data/{hash}``,
``/{dataset}/checkpoints/{hash}``: objects carry a strong ETag (their hash; the head's value for
``refs/head``), honour ``If-None-Match`` and single byte ranges. A query with a signature must
verify; without one, reads are public. ``PUT`` of data/checkpoints needs a signed URL handed
out in a push session. ``GET /`` lists the served datasets as JSON.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from odfd.app.receive_push import UploadRejectedError, store_upload
from odfd.app.served_objects import object_source
from odfd.server.state import STATE_KEY, ServerState
from protocol.errors import ParseError
from protocol.identity import Multihash
from protocol.transfer.simple import ObjectKind
from storage.errors import ObjectNotFoundError
from storage.stores.base import ObjectStore

DATASET = r"{dataset:[^/]+(?:/[^/]+)?}"
HASH = r"{hash:[^/]+}"
_INLINE = 256 * 1024
_CHUNK = 1 << 20
_KINDS = {"blocks": ObjectKind.BLOCK, "data": ObjectKind.DATA, "checkpoints": ObjectKind.CHECKPOINT}


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", list_datasets)
    app.router.add_get(f"/{DATASET}/refs/{{ref}}", get_ref)
    for folder in _KINDS:
        app.router.add_get(f"/{DATASET}/{folder}/{HASH}", get_object)
    for folder in ("data", "checkpoints"):
        app.router.add_route("PUT", f"/{DATASET}/{folder}/{HASH}", put_object)


def _state(request: web.Request) -> ServerState:
    return request.app[STATE_KEY]


def _hash(request: web.Request) -> Multihash:
    try:
        return Multihash.from_multibase(request.match_info["hash"])
    except ParseError as err:
        raise web.HTTPBadRequest(text=str(err)) from None


def _kind(request: web.Request) -> ObjectKind:
    return _KINDS[request.path.rstrip("/").rsplit("/", 2)[-2]]


async def list_datasets(request: web.Request) -> web.Response:
    state = _state(request)
    entries = []
    for record in await state.workspace.list_datasets():
        if record.id in state.withheld or not state.visible(record, request):
            continue
        entries.append(
            {
                "id": str(record.id),
                "alias": record.alias,
                "kind": record.kind.name.capitalize(),
                "head": None if record.head is None else record.head.to_multibase(),
                "sequenceNumber": record.head_sequence,
                "url": state.dataset_url(request, record.alias),
            }
        )
    return web.json_response({"datasets": entries})


async def get_ref(request: web.Request) -> web.StreamResponse:
    state = _state(request)
    record = await state.require(request.match_info["dataset"], request)
    if request.match_info["ref"] != "head":
        raise web.HTTPNotFound(text=f"no ref {request.match_info['ref']}")
    head = await state.datasets.open(record).chain.head()
    if head is None:
        raise web.HTTPNotFound(text=f"dataset {record.alias} has no head")
    body = head.to_multibase().encode()
    etag = f'"{head.to_multibase()}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache", "Content-Type": "text/plain"}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, headers=headers)


async def get_object(request: web.Request) -> web.StreamResponse:
    state = _state(request)
    path = request.match_info["dataset"]
    kind = _kind(request)
    hash = _hash(request)
    if "signature" in request.query:
        # A URL signed for a session that could read the dataset (a Smart Transfer pull with a
        # read token) is the grant itself: its GET carries no token.
        granted = state.signer.verify("GET", kind.value, hash, request.query)
        record = await state.find(path, request, signed=True)
        if record is None or granted is None or granted[0] != str(record.id):
            if record is None or not state.visible(record, request):
                raise web.HTTPNotFound(text=f"no dataset {path} on this node")
            raise web.HTTPForbidden(text="the signed URL is invalid or has expired")
    else:
        record = await state.require(path, request)
    source = await object_source(state.datasets.open(record), kind, hash)
    if isinstance(source, Path):
        return await _send_file(request, source, hash)
    return await _send_stream(request, source, hash)


async def _send_stream(
    request: web.Request, store: ObjectStore, hash: Multihash
) -> web.StreamResponse:
    """An object of a store that is not a local folder (a bucket), streamed through; a range
    request gets the whole object (HTTP lets a server ignore ``Range``)."""
    try:
        size = await store.size(hash)
    except ObjectNotFoundError:
        raise web.HTTPNotFound(text=f"no object {hash}") from None
    etag = f'"{hash.to_multibase()}"'
    headers = {
        "ETag": etag,
        "Content-Type": "application/octet-stream",
        "Cache-Control": "public, max-age=31536000, immutable",
    }
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    if request.method == "HEAD":
        headers["Content-Length"] = str(size)
        return web.Response(headers=headers)
    response = web.StreamResponse(headers=headers)
    response.content_length = size
    await response.prepare(request)
    async for chunk in store.iter_chunks(hash, _CHUNK):
        await response.write(chunk)
    await response.write_eof()
    return response


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, end_exclusive)`` of a single ``bytes=`` range; ``None`` if unsatisfiable."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        raise ValueError("only single byte ranges are supported")
    first, _, last = spec.strip().partition("-")
    if not first:
        length = int(last)
        return (max(size - length, 0), size) if length > 0 and size > 0 else None
    start = int(first)
    end = min(int(last) + 1, size) if last else size
    return (start, end) if start < end else None


async def _send_file(request: web.Request, path: Path, hash: Multihash) -> web.StreamResponse:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise web.HTTPNotFound(text=f"no object {hash}") from None
    try:
        size = os.fstat(fd).st_size
        etag = f'"{hash.to_multibase()}"'
        headers = {
            "ETag": etag,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            "Cache-Control": "public, max-age=31536000, immutable",
        }
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        start, end, status = 0, size, 200
        if "Range" in request.headers and request.headers.get("If-Range", etag) == etag:
            try:
                span = _parse_range(request.headers["Range"], size)
            except ValueError:
                span = (0, size)
            if span is None:
                raise web.HTTPRequestRangeNotSatisfiable(
                    headers={"Content-Range": f"bytes */{size}"}
                )
            start, end = span
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        if request.method == "HEAD":
            headers["Content-Length"] = str(end - start)
            return web.Response(status=status, headers=headers)
        if end - start <= _INLINE:
            return web.Response(
                status=status, body=os.pread(fd, end - start, start), headers=headers
            )
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = end - start
        await response.prepare(request)
        offset = start
        while offset < end:
            chunk = await asyncio.to_thread(os.pread, fd, min(_CHUNK, end - offset), offset)
            if not chunk:
                break
            await response.write(chunk)
            offset += len(chunk)
        await response.write_eof()
        return response
    finally:
        os.close(fd)


async def put_object(request: web.Request) -> web.Response:
    """An upload through a signed URL of a push session; the bytes must hash to the URL's hash
    and have the signed size, or nothing is stored."""
    state = _state(request)
    kind = _kind(request)
    hash = _hash(request)
    granted = state.signer.verify("PUT", kind.value, hash, request.query)
    if granted is None:
        raise web.HTTPForbidden(text="the signed upload URL is invalid or has expired")
    session_id, size = granted
    session = state.uploads.get(session_id)
    if session is None:
        raise web.HTTPForbidden(text="the push session of this upload URL is over")
    if request.content_length is not None and request.content_length != size:
        raise (
            web.HTTPRequestEntityTooLarge(max_size=size, actual_size=request.content_length)
            if request.content_length > size
            else web.HTTPBadRequest(text=f"expected {size} bytes")
        )
    try:
        await store_upload(session.dataset, kind, hash, size, _body(request))
    except UploadRejectedError as err:
        raise web.HTTPBadRequest(text=str(err)) from None
    return web.Response(status=200)


async def _body(request: web.Request) -> AsyncIterator[bytes]:
    async for chunk in request.content.iter_chunked(_CHUNK):
        yield chunk
