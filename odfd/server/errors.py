"""How a refusal leaves the server: ``{"message": ...}`` with its status on every route, the
transfer routes' (``/{dataset}/refs/head``, ``blocks``, ``data``, ``checkpoints``, ``pull``,
``push``) included, as the reference's HTTP adapter answers (its ``ApiError``); OData's own error
document under ``/odata`` (``odfd.server.odata.errors``). Handlers and middlewares raise aiohttp's
``HTTPException`` with their words as text; this middleware, outermost, gives it its shape. A
path no route serves is answered as the reference answers it, ``404`` with the text
``Not Found`` (``odfd sql --remote`` tells a URL without a query API by it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.web_urldispatcher import MatchInfoError

from odfd.server.odata import errors as odata_errors


@web.middleware
async def errors_as_json(
    request: web.Request, handler: Callable[[web.Request], Any]
) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except web.HTTPException as error:
        if error.status < 400:
            raise
        message = _message(request, error)
        if odata_errors.is_odata(request.path):
            odata_errors.reshape(request, error, message)
        elif isinstance(error, web.HTTPNotFound) and _no_route(request):
            error.text = message  # the reference's body for a path nothing serves: "Not Found"
        elif error.content_type != "application/json":
            error.text = json.dumps({"message": message})
            error.content_type = "application/json"
        raise


def _no_route(request: web.Request) -> bool:
    return isinstance(request.match_info, MatchInfoError)


def _message(request: web.Request, error: web.HTTPException) -> str:
    """The error's own words: a JSON error's ``message``, a text one's text (aiohttp's default
    ``404: Not Found`` is its reason), and for a method a route does not take, the methods it
    takes (as ``Allow`` names them) instead of aiohttp's ``405: Method Not Allowed``."""
    if isinstance(error, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(error.allowed_methods))
        return f"{request.method} is not allowed on {request.path}; it takes {allowed}"
    text = error.text or ""
    if error.content_type == "application/json":
        try:
            found = json.loads(text).get("message")
        except (ValueError, AttributeError):
            found = None
        return found if isinstance(found, str) else text
    if text == f"{error.status}: {error.reason}" or not text:
        return error.reason
    return text
