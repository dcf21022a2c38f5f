"""``GET /info``, ``GET /accounts/me`` and ``GET /openapi.json``."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from aiohttp import web

from odfd.app.answers import node_signer
from odfd.app.resources import DEFAULT_ACCOUNT, account_handle
from odfd.server.query_api import context
from odfd.server.query_api.errors import error_response
from odfd.server.state import bearer_token


async def info(request: web.Request) -> web.Response:
    """Whether datasets have account names, and the ``did:key`` that signs this node's answers
    (absent on a node without an identity key)."""
    visible = context.visible(request)
    records = await context.node(request).workspace.list_datasets()
    body: dict[str, object] = {
        "isMultiTenant": any("/" in record.alias for record in records if visible(record))
    }
    signer = node_signer(context.node(request))
    if signer is not None:
        body["did"] = str(signer.did)
    return web.json_response(body)


async def account(request: web.Request) -> web.Response:
    """The node's one account, for a request with any of its tokens (odfd has no users)."""
    config = context.state(request).config
    token = bearer_token(request)
    known = config.may_read_private(token) or (token is not None and token in config.push_tokens)
    if not known:
        return error_response(401, "Unauthenticated")
    handle = account_handle(DEFAULT_ACCOUNT)
    return web.json_response({"id": handle.id, "accountName": str(handle.name)})


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=openapi_document(), content_type="application/json")


@cache
def openapi_document() -> bytes:
    """The OpenAPI 3.1 description of this API (``openapi.json`` beside this module)."""
    return files(__package__).joinpath("openapi.json").read_bytes()
