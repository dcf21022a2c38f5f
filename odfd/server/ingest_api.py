"""``POST /{dataset}/ingest``: raw data pushed into a root dataset's push source, on the wire
as the reference's api-server (``ingest_handler.rs``).

The body is the data (``Content-Type``: CSV, JSON, NdJson, GeoJSON, NdGeoJSON, Parquet or a
zipped Shapefile; another format than the source's is transcoded into the source's schema),
``?sourceName=`` picks the push source and the ``odf-event-time`` header gives the event time of
records that carry none. With ``?uploadToken=`` the data is instead a file the same account
uploaded ahead (``odfd.server.upload_api``), its media type the one declared when the upload was
prepared, else its file name's extension; it is ingested exactly as the same bytes in the body
would be (an unknown, expired or altered token: 404; another account's upload: 403; a file not
of its declared length: 400). It takes a push or admin token (``[server] push_tokens``,
``admin_tokens``). Answers: 200 (empty body) once committed or when there was nothing to add;
otherwise ``{"message": …}`` with 400 (no such source, or the data cannot be read, breaks the
schema, or a bad header), 401 (no token), 403 (a token that may not ingest), 404 (no such
dataset, or a private one the token may not see), 413 (body too large), 415 (media type), 409
(other writers kept moving the head). Nothing is committed unless the whole ingest succeeded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.ingest import staging_folder
from odfd.app.push_ingest import (
    IngestLocks,
    IngestRefusedError,
    PushIngestOptions,
    UnsupportedMediaTypeError,
    format_of_media_type,
    media_type_of_file_name,
    push_ingest,
)
from odfd.app.uploads import UploadError, UploadToken, uploads_of
from odfd.app.write_log import Actor
from odfd.server.simple import DATASET
from odfd.server.state import STATE_KEY, ServerState
from protocol.errors import OdfError, ParseError
from protocol.model import Timestamp
from storage.errors import RefCasError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from protocol.identity import DatasetId

log = logging.getLogger(__name__)

MAX_INGEST_BYTES = 1 << 30
"""The largest body one ingest takes (the data is staged on disk, never held in memory)."""

EVENT_TIME_HEADER = "odf-event-time"
UPLOAD_TOKEN = "uploadToken"
"""The query parameter naming a file uploaded ahead (``odfd.server.upload_api``) as the data."""
INGEST_ROUTE = ("POST", "ingest")
"""The route's method and its name under a dataset's path (``/{dataset}/ingest``)."""
_CHUNK = 1 << 20


Ingested = Callable[["DatasetId"], Awaitable[None]]
"""Told of each dataset an ingest moved (a daemon updates its derivatives and audits it)."""


class IngestApi:
    """Mounts the ingest route on a server's app (``odfd.server.app.Mount``). ``node`` gives the
    node to ingest with at each request (a daemon's reload swaps its node)."""

    def __init__(self, node: Callable[[], Node], *, ingested: Ingested | None = None) -> None:
        self._node = node
        self._ingested = ingested
        self._locks = IngestLocks()

    def __call__(self, app: web.Application) -> None:
        method, name = INGEST_ROUTE
        app.router.add_route(method, f"/{DATASET}/{name}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        state: ServerState = request.app[STATE_KEY]
        actor = _authorize(state, request)
        dataset_path = request.match_info["dataset"]
        try:
            record = await state.find(dataset_path)
        except web.HTTPForbidden as withheld:  # the daemon withholds it: said as JSON too
            raise _error(web.HTTPForbidden, withheld.text or "forbidden") from None
        decision = None if record is None else state.decide(request, Action.WRITE, record.alias)
        if record is None or decision is None or not decision.visible:
            raise _error(web.HTTPNotFound, f"no dataset {dataset_path} on this node")
        if not decision.allowed:
            who = state.principal(request).label
            raise _error(
                web.HTTPForbidden, f"{who} may not ingest into {record.alias}: {decision.reason}"
            )
        node = self._node()
        event_time = _event_time(request)
        body = staging_folder(node.workspace.root) / f"ingest-{uuid.uuid4().hex}"
        upload_token = request.query.get(UPLOAD_TOKEN)
        upload = None
        if upload_token is not None:
            upload = await _uploaded(node, actor.account, upload_token)
            media_type = upload.token.content_type or media_type_of_file_name(
                upload.token.file_name
            )
        else:
            media_type = request.headers.get("Content-Type")
        options = PushIngestOptions(
            source_name=request.query.get("sourceName"),
            media_type=media_type,
            event_time=event_time,
        )
        try:
            format_of_media_type(options.media_type)  # a 415 before reading the body
        except UnsupportedMediaTypeError as err:
            raise _error(web.HTTPUnsupportedMediaType, str(err)) from None
        try:
            if upload is None:
                await _receive(request, body)
            else:
                await asyncio.to_thread(_stage, upload.path, body)
            outcome = await push_ingest(
                node, record.id, body, options, locks=self._locks, actor=actor
            )
        except UnsupportedMediaTypeError as err:
            raise _error(web.HTTPUnsupportedMediaType, str(err)) from None
        except IngestRefusedError as err:
            log.info("ingest into %s refused: %s", record.alias, err)
            raise _error(web.HTTPBadRequest, _without_path(str(err), body)) from None
        except RefCasError as err:
            raise _error(
                web.HTTPConflict, f"{record.alias}: other writes kept moving its head: {err}"
            ) from None
        except OdfError as err:
            log.error("ingest into %s failed: %s", record.alias, err)
            raise _error(web.HTTPInternalServerError, _without_path(str(err), body)) from None
        finally:
            await asyncio.to_thread(body.unlink, True)
        if outcome.up_to_date:
            log.info("ingest into %s: nothing committed: %s", record.alias, outcome.reason)
            return web.Response(status=200)
        log.info(
            "ingest into %s: %d record(s), head %s",
            record.alias,
            outcome.num_records,
            outcome.new_head,
        )
        if self._ingested is not None:
            await self._ingested(record.id)
        return web.Response(status=200)


def _authorize(state: ServerState, request: web.Request) -> Actor:
    """Who ingests: the request's account (a ``[server]`` list token: the built-in account)."""
    account = state.principal(request).account
    if account is None:
        raise _error(
            web.HTTPUnauthorized,
            "ingesting needs a bearer token of an account that may write to the dataset "
            "(Authorization: Bearer …)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Actor(account, "http")


@dataclass(frozen=True, slots=True)
class _Upload:
    token: UploadToken
    path: Path


async def _uploaded(node: Node, account: str, text: str) -> _Upload:
    """The file uploaded under ``text`` (the reference's ``uploadToken``) by ``account``."""
    try:
        token = UploadToken.decode(text)
        return _Upload(token, await uploads_of(node).content(token, account))
    except UploadError as err:
        raise _error(_STATUS[err.status], str(err)) from None


_STATUS: dict[int, Callable[..., web.HTTPException]] = {
    400: web.HTTPBadRequest,
    403: web.HTTPForbidden,
    404: web.HTTPNotFound,
}


def _stage(upload: Path, body: Path) -> None:
    """The upload as this ingest's own file (a link; a copy across file systems), so the
    upload's expiry cannot remove it mid-ingest."""
    body.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(upload, body)
    except OSError:
        shutil.copyfile(upload, body)


def _event_time(request: web.Request) -> Timestamp | None:
    text = request.headers.get(EVENT_TIME_HEADER)
    if text is None:
        return None
    try:
        return Timestamp.parse_rfc3339(text.strip())
    except ParseError as err:
        raise _error(web.HTTPBadRequest, f"header {EVENT_TIME_HEADER}: {err}") from None


async def _receive(request: web.Request, path: Path) -> None:
    """Streams the body into ``path`` (chunks written on a thread), refusing one too large."""
    if request.content_length is not None and request.content_length > MAX_INGEST_BYTES:
        raise _too_large()
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    out: BinaryIO = await asyncio.to_thread(open, path, "wb")
    try:
        size = 0
        async for chunk in request.content.iter_chunked(_CHUNK):
            size += len(chunk)
            if size > MAX_INGEST_BYTES:
                raise _too_large()
            await asyncio.to_thread(out.write, chunk)
    finally:
        await asyncio.to_thread(out.close)


def _too_large() -> web.HTTPException:
    message = f"the body is larger than this node's ingest limit of {MAX_INGEST_BYTES} bytes"
    return web.HTTPRequestEntityTooLarge(
        MAX_INGEST_BYTES,
        MAX_INGEST_BYTES + 1,
        text=json.dumps({"message": message}),
        content_type="application/json",
    )


def _without_path(message: str, body: Path) -> str:
    """The staged body's file name means nothing to the client: it is "the request body"."""
    return message.replace(str(body.absolute()), "the request body").replace(
        str(body), "the request body"
    )


def _error(
    kind: Callable[..., web.HTTPException], message: str, **kwargs: object
) -> web.HTTPException:
    return kind(text=json.dumps({"message": message}), content_type="application/json", **kwargs)
