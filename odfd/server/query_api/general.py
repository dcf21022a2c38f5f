"""``GET /info``, ``GET /accounts/me``, ``GET /openapi.json``, ``GET /system/health``, and
``POST /sign/eip712`` answered as the reference answers it on a node whose operator enabled no
signing."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from aiohttp import web

from odfd.app.accounts import subject_of
from odfd.app.answers import node_signer
from odfd.server.query_api import context
from odfd.server.query_api.errors import error_response
from odfd.server.state import bearer_token
from protocol.query import RequestError
from storage.errors import StorageError

HEALTH_CHECKS = ("liveness", "readiness", "startup")


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
    """The account of the request's token: an issued token's account, or the built-in account
    for a token of the ``[server]`` lists."""
    subject = await subject_of(
        context.node(request), context.state(request).config, bearer_token(request)
    )
    if subject is None:
        return error_response(401, "Unauthenticated")
    body: dict[str, object] = {"id": subject.id, "accountName": subject.name}
    if subject.display_name != subject.name:
        body["displayName"] = subject.display_name
    if subject.email is not None:
        body["email"] = subject.email
    if subject.avatar_url is not None:
        body["avatarUrl"] = subject.avatar_url
    return web.json_response(body)


async def health(request: web.Request) -> web.Response:
    """The reference's health check (``?type=liveness|readiness|startup``, what container
    probes ask): ``{"ok": true}`` while the server answers, and for readiness and startup once
    the node reads its catalog; else 503 ``{"ok": false, "reason": …}``."""
    kind = request.query.get("type", HEALTH_CHECKS[0])
    if kind not in HEALTH_CHECKS:
        expected = ", ".join(f"`{check}`" for check in HEALTH_CHECKS)
        raise RequestError("type", f"unknown variant `{kind}`, expected one of {expected}")
    if kind != "liveness":
        try:
            await context.node(request).workspace.list_datasets()
        except StorageError as error:
            reason = f"the node cannot read its catalog: {error}"
            return web.json_response({"ok": False, "reason": reason}, status=503)
    return web.json_response({"ok": True})


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=openapi_document(), content_type="application/json")


@cache
def openapi_document() -> bytes:
    """The OpenAPI 3.1 description of this API (``openapi.json`` beside this module)."""
    return files(__package__).joinpath("openapi.json").read_bytes()


EIP712_UNAVAILABLE = (
    "EIP-712 signing is not available on this node: odfd keeps no managed keys to sign with "
    "(the reference's /sign/eip712 needs its operator's secp256k1 node key and DID secret keys)"
)


async def sign_eip712(request: web.Request) -> web.Response:
    """501 with a JSON ``message``, as the reference's ``SignEip712UseCaseError::NotConfigured``,
    so its clients read why instead of a bare 404."""
    return error_response(501, EIP712_UNAVAILABLE)
