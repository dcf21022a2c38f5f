"""A request's token refused, in the reference's words and status, on every route: 401 with
``{"message": ...}`` saying ``No authentication token provided`` (none sent where one is
needed), ``Authentication token expired`` or ``Authentication token invalid`` (unknown or
revoked), as kamu-cli's HTTP adapter and ``/platform/token/validate`` say it."""

from __future__ import annotations

import json

from aiohttp import web

from odfd.app.accounts import token_expired
from storage.workspace import Workspace

NO_TOKEN = "No authentication token provided"
EXPIRED_TOKEN = "Authentication token expired"
INVALID_TOKEN = "Authentication token invalid"


async def bad_token_words(workspace: Workspace, token: str) -> str:
    """Why ``token`` (one the node does not accept) is refused: an issued token past its
    expiry is expired; anything else (unknown, revoked) is invalid."""
    return EXPIRED_TOKEN if await token_expired(workspace, token) else INVALID_TOKEN


async def bad_token(workspace: Workspace, token: str | None) -> web.HTTPUnauthorized:
    """The refusal of a request whose token the node does not accept."""
    words = NO_TOKEN if not token else await bad_token_words(workspace, token)
    return refusal(words, 'Bearer error="invalid_token"')


def refusal(words: str, challenge: str) -> web.HTTPUnauthorized:
    return web.HTTPUnauthorized(
        text=json.dumps({"message": words}),
        content_type="application/json",
        headers={"WWW-Authenticate": challenge},
    )
