"""Client errors as the reference answers them: a status and ``{"message": ...}``; nothing
failure of the node's own leaves as a stack trace (it is logged; the client gets one line)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from odfd.app import answers
from protocol.errors import OdfError
from protocol.query import (
    RenderError,
    RequestError,
    ResponseSigningNotConfigured,
    UnsupportedProofTypeError,
)
from storage.errors import StorageError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_log = logging.getLogger(__name__)

_STATUS: tuple[tuple[type[OdfError], int], ...] = (
    (RequestError, 400),
    (answers.BadQueryError, 400),
    (answers.QueryRefusedError, 400),
    (answers.QueryFailedError, 400),
    (RenderError, 400),
    (answers.QueryDatasetNotFoundError, 404),
    (answers.QueryBlockNotFoundError, 404),
    (ResponseSigningNotConfigured, 501),
    (UnsupportedProofTypeError, 501),
)


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"message": message}, status=status)


def json_errors(handler: Handler) -> Handler:
    """``handler`` with its failures answered as JSON."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            return error_response(error.status, error.text or error.reason)
        except OdfError as error:
            for kind, status in _STATUS:
                if isinstance(error, kind):
                    return error_response(status, str(error))
            _log.error("%s %s failed: %s", request.method, request.path, error)
            if isinstance(error, StorageError):
                return error_response(503, f"the node cannot read its data: {error}")
            return error_response(500, f"Internal error: {error}")

    return guarded
