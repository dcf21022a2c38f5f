"""The reference's file upload routes (``upload_handler.rs``), for an ingest of a file sent ahead:

* ``POST /platform/file/upload/prepare?fileName=&contentLength=&contentType=``: a new upload;
  answers the reference's ``UploadContext`` (``uploadUrl``, ``method``, ``useMultipart``,
  ``headers``, ``fields``, ``uploadToken``); 400 "Content too large" past ``[server]
  upload_max_bytes``.
* ``POST /platform/file/upload/{upload_token}``: the file, as the form part ``file`` of a
  ``multipart/form-data`` body (the reference's way) or as the whole body; 400 when its length
  is not the declared one.
* ``GET /platform/file/upload/{upload_token}``: the file back (anyone holding the token, as the
  reference).

Preparing and sending take a token of an account that may write (what it may write to is decided
when the upload is ingested, ``POST /{dataset}/ingest?uploadToken=``); an upload of another
account is 403. Every refusal is ``{"message": …}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from aiohttp import BodyPartReader, MultipartReader, web

from odfd.app.authorization import Action
from odfd.app.uploads import UploadError, UploadToken, uploads_of
from odfd.server.query_api.errors import error_response
from odfd.server.refusals import NO_TOKEN
from odfd.server.state import STATE_KEY, bearer_token

if TYPE_CHECKING:
    from odfd.app.node import Node

PREPARE = "/platform/file/upload/prepare"
UPLOAD = "/platform/file/upload/{upload_token}"
ROUTES = [("POST", PREPARE), ("POST", UPLOAD), ("GET", UPLOAD)]
"""The routes this module adds (``/openapi.json`` documents each)."""
FILE_PART = "file"
_CHUNK = 1 << 20


class UploadApi:
    """Mounts the upload routes on a server's app; ``node`` gives the node at each request (a
    daemon's reload swaps it)."""

    def __init__(self, node: Callable[[], Node]) -> None:
        self._node = node

    def __call__(self, app: web.Application) -> None:
        app.router.add_post(PREPARE, self.prepare)
        app.router.add_post(UPLOAD, self.upload)
        app.router.add_get(UPLOAD, self.download, allow_head=False)

    async def prepare(self, request: web.Request) -> web.Response:
        account = _writer(request)
        query = request.query
        file_name = query.get("fileName")
        length_text = query.get("contentLength")
        if file_name is None or length_text is None:
            return error_response(400, "fileName and contentLength are required query parameters")
        try:
            content_length = int(length_text)
        except ValueError:
            return error_response(400, f"contentLength {length_text!r} is not an integer")
        try:
            token = await uploads_of(self._node()).prepare(
                account, file_name, query.get("contentType") or None, content_length
            )
        except UploadError as err:
            return error_response(err.status, str(err))
        state = request.app[STATE_KEY]
        base = state.config.base_url or f"{request.url.origin()}/"
        encoded = token.encode()
        bearer = bearer_token(request)
        return web.json_response(
            {
                "uploadUrl": f"{base}platform/file/upload/{encoded}",
                "method": "POST",
                "useMultipart": True,
                "headers": [["Authorization", f"Bearer {bearer}"]] if bearer else [],
                "fields": [],
                "uploadToken": encoded,
            }
        )

    async def upload(self, request: web.Request) -> web.Response:
        account = _writer(request)
        try:
            token = UploadToken.decode(request.match_info["upload_token"])
            await uploads_of(self._node()).save(account, token, await _file_chunks(request))
        except UploadError as err:
            return error_response(err.status, str(err))
        return web.Response(status=200)

    async def download(self, request: web.Request) -> web.StreamResponse:
        try:
            token = UploadToken.decode(request.match_info["upload_token"])
            path = await uploads_of(self._node()).content(token)
        except UploadError as err:
            return error_response(err.status, str(err))
        return web.FileResponse(path, headers={"Content-Type": "application/octet-stream"})


def _writer(request: web.Request) -> str:
    """The account an upload is for: one whose token may write (ingest) at all."""
    principal = request.app[STATE_KEY].principal(request)
    if principal.account is None:
        raise _refusal(
            web.HTTPUnauthorized,
            NO_TOKEN,
            headers={"WWW-Authenticate": "Bearer"},
        )
    if principal.limit is not None and Action.WRITE not in principal.limit:
        raise _refusal(
            web.HTTPForbidden, f"{principal.label}'s token ({principal.via}) may not ingest"
        )
    return principal.account


async def _file_chunks(request: web.Request) -> AsyncIterator[bytes]:
    """The file's bytes: the only form part ``file`` of a multipart body, else the whole body."""
    if not request.content_type.startswith("multipart/"):
        return request.content.iter_chunked(_CHUNK)
    try:
        reader = await request.multipart()
        part = await reader.next()
    except (ValueError, AssertionError) as err:
        raise UploadError(f"the multipart body cannot be read: {err}") from None
    if not isinstance(part, BodyPartReader) or part.name != FILE_PART:
        raise UploadError("Expected 'file' to be the only part of upload form")
    return _part_chunks(reader, part)


async def _part_chunks(reader: MultipartReader, part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(_CHUNK):
        yield chunk
    if await reader.next() is not None:
        raise UploadError("Expected 'file' to be the only part of upload form")


def _refusal(
    kind: Callable[..., web.HTTPException], message: str, **kwargs: object
) -> web.HTTPException:
    return kind(text=json.dumps({"message": message}), content_type="application/json", **kwargs)
