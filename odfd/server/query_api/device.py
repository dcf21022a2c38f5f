"""The device login routes the reference's ``kamu login URL`` calls (:mod:`odfd.app.device_login`):
``GET /assets/runtime-config.json`` (where the CLI finds the API of the front end it was given:
here the same server), ``POST /platform/token/device/authorization`` (a device code and the page
to sign in at, ``/v/login?deviceCode=…``: :mod:`odfd.server.query_api.login_page`) and ``POST
/platform/token/device`` (the CLI's poll: the token once the user signed in, else 400 with
RFC 8628's error code as ``message``). Both ``POST``s take form fields, as the reference's."""

from __future__ import annotations

import uuid

from aiohttp import web

from odfd.app.device_login import (
    DEVICE_CODE_SECONDS,
    POLL_SECONDS,
    TOKEN_SECONDS,
    DeviceCodes,
    DeviceLoginError,
    TooManyDeviceLogins,
)
from odfd.server.query_api import context
from odfd.server.query_api.errors import error_response

DEVICE_CODES_KEY: web.AppKey[DeviceCodes] = web.AppKey("odfd_device_codes", DeviceCodes)
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
LOGIN_PAGE = "v/login"


async def runtime_config(request: web.Request) -> web.Response:
    return web.json_response({"apiServerHttpUrl": context.base_url(request)})


async def _fields(request: web.Request, *names: str) -> list[str]:
    """The form fields ``names`` of ``request`` (``HTTPBadRequest`` naming a missing one)."""
    form = await request.post()
    values = []
    for name in names:
        value = form.get(name)
        if not isinstance(value, str):
            raise web.HTTPBadRequest(text=f"missing form field `{name}`")
        values.append(value)
    return values


async def authorization(request: web.Request) -> web.Response:
    [client_id] = await _fields(request, "client_id")
    if not client_id:
        return error_response(400, "Invalid client_id")
    try:
        code = request.app[DEVICE_CODES_KEY].create()
    except TooManyDeviceLogins as err:
        return error_response(429, str(err))
    return web.json_response(
        {
            "device_code": code,
            "user_code": "",
            "verification_uri": context.base_url(request) + LOGIN_PAGE,
            "verification_uri_complete": None,
            "expires_in": DEVICE_CODE_SECONDS,
            "interval": POLL_SECONDS,
        }
    )


async def token(request: web.Request) -> web.Response:
    grant_type, _, code = await _fields(request, "grant_type", "client_id", "device_code")
    if grant_type != GRANT_TYPE:
        return error_response(400, "invalid_grant")
    try:
        uuid.UUID(code)
    except ValueError:
        return error_response(400, "Invalid device_code")
    try:
        issued = await request.app[DEVICE_CODES_KEY].redeem(context.node(request), code)
    except DeviceLoginError as err:
        return error_response(400, str(err.refusal))
    return web.json_response(
        {
            "access_token": issued.secret,
            "token_type": "Bearer",
            "expires_in": TOKEN_SECONDS,
            "refresh_token": None,
            "score": None,
        }
    )
