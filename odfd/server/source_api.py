"""``POST /source/{name}/ingest`` (and ``/{account}/source/{name}/ingest``): records pushed to an
RFC-018 ``RestEndpoint`` Source, held in its buffer until a flow's ``Ingest`` task commits them
(``odfd.app.source_push``; the body is JSON records). Posting writes data into the Source's
account, so the node's one decision asks for write on that account: the account's own
token, an editor (or stronger) role in it when it is an organisation, or a node admin; the
``[server] push_tokens`` act for the built-in account, whose Sources have no account part.
Answers: 202 ``{"accepted", "dropped", "buffered"}``
once the records are in the buffer; otherwise ``{"message": …}`` with 400 (a record that is not a
JSON object), 401/403 (token), 404 (no such Source, or one that takes no pushes), 413 (body too
large), 415 (media type), 429 (the buffer is full and its ``overflowPolicy`` is ``Reject``:
nothing of the post was taken).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.resources import DEFAULT_ACCOUNT
from odfd.app.source_push import (
    BadRecordsError,
    NoPushSourceError,
    UnsupportedMediaTypeError,
    push_source,
)
from odfd.server.state import STATE_KEY, ServerState
from odfd.sources.buffers import BufferFullError, SourceBuffers

if TYPE_CHECKING:
    from odfd.app.node import Node

log = logging.getLogger(__name__)

MAX_PUSH_BYTES = 64 << 20
"""The largest body one push takes (it is held in memory, as the buffer is)."""

Pushed = Callable[[str], Awaitable[None]]
"""Told the name of a Source that received records (a daemon checks its flows' triggers)."""


class SourceApi:
    """Mounts the push route of ``RestEndpoint`` Sources (``odfd.server.app.Mount``)."""

    def __init__(
        self, node: Callable[[], Node], buffers: SourceBuffers, *, pushed: Pushed | None = None
    ) -> None:
        self._node = node
        self._buffers = buffers
        self._pushed = pushed

    def __call__(self, app: web.Application) -> None:
        app.router.add_post("/source/{name}/ingest", self.handle)
        app.router.add_post("/{account}/source/{name}/ingest", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        state: ServerState = request.app[STATE_KEY]
        account = request.match_info.get("account")
        _authorize(state, request, (account or str(DEFAULT_ACCOUNT)).lower())
        name = request.match_info["name"]
        stored = name if account is None else f"{account}/{name}"
        try:
            source = await push_source(self._node(), stored)
        except NoPushSourceError as err:
            raise _error(web.HTTPNotFound, str(err)) from None
        if request.content_length is not None and request.content_length > MAX_PUSH_BYTES:
            raise _too_large()
        body = await request.content.read(MAX_PUSH_BYTES + 1)
        if len(body) > MAX_PUSH_BYTES:
            raise _too_large()
        try:
            accepted = source.push(self._buffers, body, request.headers.get("Content-Type"))
        except BadRecordsError as err:
            raise _error(web.HTTPBadRequest, str(err)) from None
        except UnsupportedMediaTypeError as err:
            raise _error(web.HTTPUnsupportedMediaType, str(err)) from None
        except BufferFullError as err:
            raise _error(web.HTTPTooManyRequests, str(err)) from None
        if accepted.dropped:
            log.warning(
                "source buffer full: oldest records dropped",
                extra={"source": source.name, "dropped": accepted.dropped},
            )
        if self._pushed is not None:
            await self._pushed(source.name)
        return web.json_response(
            {
                "accepted": accepted.records,
                "dropped": accepted.dropped,
                "buffered": accepted.buffered,
            },
            status=202,
        )


def _authorize(state: ServerState, request: web.Request, account: str) -> None:
    """Posting records writes data into ``account``: the node's one decision is asked."""
    if state.principal(request).account is None:
        raise _error(
            web.HTTPUnauthorized,
            "pushing records needs a bearer token (Authorization: Bearer …)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    decision = state.decide_account(request, Action.WRITE, account)
    if not decision.allowed:
        raise _error(
            web.HTTPForbidden,
            f"this token may not push records to the Sources of account {account} (that needs "
            f"the account itself, an editor role in it or a node admin); why: {decision.reason}",
        )


def _too_large() -> web.HTTPException:
    message = f"the body is larger than a push's limit of {MAX_PUSH_BYTES} bytes"
    return web.HTTPRequestEntityTooLarge(
        MAX_PUSH_BYTES,
        MAX_PUSH_BYTES + 1,
        text=json.dumps({"message": message}),
        content_type="application/json",
    )


def _error(
    kind: Callable[..., web.HTTPException], message: str, **kwargs: object
) -> web.HTTPException:
    return kind(text=json.dumps({"message": message}), content_type="application/json", **kwargs)
