"""``POST /platform/login`` and ``GET /platform/token/validate``, as the reference's clients call
them.

A login's body is ``{"loginMethod": "password", "loginCredentialsJson": "{\\"login\\": …,
\\"password\\": …}"}`` (the credentials are a JSON document inside a string); the answer is
``{"accessToken": …}``, or 401 for wrong credentials and 400 for a malformed request. Failed logins
for a name slow its later attempts (:class:`LoginThrottle`); neither the password nor a token ever
appears in an answer or the log."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from odfd.app.accounts import LoginRejected, login_with_password, subject_of
from odfd.server.query_api import context
from odfd.server.query_api.errors import error_response
from odfd.server.refusals import NO_TOKEN, bad_token_words
from odfd.server.state import bearer_token

PASSWORD_METHOD = "password"
VALIDATE_PATH = "/platform/token/validate"


@dataclass
class LoginThrottle:
    """After ``free`` failed logins for a name, each further attempt for it waits ``base`` seconds
    doubled per failure (at most ``ceiling``) before it is checked; a success clears the count.
    Failures are forgotten after ``memory`` seconds without one."""

    free: int = 3
    base: float = 0.5
    ceiling: float = 8.0
    memory: float = 900.0
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict)

    def delay(self, login: str) -> float:
        count, last = self._failures.get(login, (0, 0.0))
        if count < self.free or self.clock() - last > self.memory:
            return 0.0
        return min(self.ceiling, self.base * 2 ** (count - self.free))

    async def wait_turn(self, login: str) -> None:
        """Sleeps the attempt's :meth:`delay` for ``login`` before it is checked."""
        wait = self.delay(login)
        if wait:
            await asyncio.sleep(wait)

    def failed(self, login: str) -> None:
        count, last = self._failures.get(login, (0, 0.0))
        now = self.clock()
        if now - last > self.memory:
            count = 0
        self._failures[login] = (count + 1, now)

    def succeeded(self, login: str) -> None:
        self._failures.pop(login, None)


THROTTLE_KEY: web.AppKey[LoginThrottle] = web.AppKey("odfd_login_throttle", LoginThrottle)


def login_credentials(body: object) -> tuple[str, str]:
    """The login and password of a login request; a ``ValueError`` naming the field that is
    missing or wrong (never quoting a value: it could be the password)."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    for name in ("loginMethod", "loginCredentialsJson"):
        if name not in body:
            raise ValueError(f"missing field `{name}`")
    method = body["loginMethod"]
    if method != PASSWORD_METHOD:
        raise ValueError(f"unsupported loginMethod {method!r}: odfd supports {PASSWORD_METHOD!r}")
    raw = body["loginCredentialsJson"]
    if not isinstance(raw, str):
        raise ValueError("loginCredentialsJson must be a string holding a JSON object")
    try:
        credentials = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError("loginCredentialsJson is not JSON") from None
    if not isinstance(credentials, dict):
        raise ValueError("loginCredentialsJson must hold a JSON object")
    login, password = credentials.get("login"), credentials.get("password")
    if not isinstance(login, str) or not isinstance(password, str):
        raise ValueError("loginCredentialsJson needs string fields login and password")
    return login, password


async def login(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except json.JSONDecodeError:  # its text would quote the body, which could hold the password
        return error_response(400, "the body is not JSON")
    try:
        name, password = login_credentials(body)
    except ValueError as err:
        return error_response(400, str(err))
    throttle = request.app[THROTTLE_KEY]
    key = name.lower()
    await throttle.wait_turn(key)
    try:
        issued = await login_with_password(context.node(request), name, password)
    except LoginRejected as err:
        throttle.failed(key)
        return error_response(401, f"Rejected credentials: {err}")  # the reference's words
    throttle.succeeded(key)
    return web.json_response({"accessToken": issued.secret})


async def validate(request: web.Request) -> web.Response:
    """200 for a valid token; else 401 with the reference's message: none sent, expired, or
    invalid (unknown or revoked), as every route refuses a token (``odfd.server.refusals``). The
    server's ``authorize`` lets a refused token through to this path alone
    (``SELF_JUDGED_KEY``): here it is an answer, not a refusal."""
    token = bearer_token(request)
    if token is None:
        return error_response(401, NO_TOKEN)
    node = context.node(request)
    if await subject_of(node, context.state(request).config, token) is not None:
        return web.Response(status=200)
    return error_response(401, await bad_token_words(node.workspace, token))
