"""The device login the reference's ``kamu login URL`` runs (OAuth 2.0 device authorization,
RFC 8628, as kamu-cli's api-server answers it): the CLI asks for a device code, sends the user's
browser to the node's login page with it, and polls until the user has signed in there; the
token of that sign-in (a password login's, :func:`odfd.app.accounts.login_with_password`) is
then issued to the CLI once, when it polls (a sign-in never redeemed leaves no token behind).

Pending codes live in the serving process's memory, as a sign-in page in progress does: a
restart forgets them and the CLI's next poll is ``access_denied`` (the user logs in again)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from odfd.app.accounts import (
    LOGIN_TOKEN_LIFETIME,
    IssuedToken,
    LoginRejected,
    check_password,
    create_token,
)
from odfd.errors import OdfdError

if TYPE_CHECKING:
    from odfd.app.node import Node

DEVICE_CODE_SECONDS = 300
"""How long a device code waits for its sign-in (the reference's 5 minutes)."""
POLL_SECONDS = 5
"""How often the CLI is told to poll (RFC 8628's default, the reference's)."""
TOKEN_SECONDS = int(LOGIN_TOKEN_LIFETIME.total_seconds())
MAX_PENDING = 1000
"""Device codes awaiting their sign-in at once: anyone may ask for one, so their memory is
bounded."""


class Refusal(StrEnum):
    """Why a poll gets no token: RFC 8628's error codes, as the reference sends them."""

    PENDING = "authorization_pending"
    DENIED = "access_denied"
    EXPIRED = "expired_token"


class TooManyDeviceLogins(OdfdError):
    """``MAX_PENDING`` device codes await their sign-in already."""


class DeviceLoginError(OdfdError):
    """A poll or a sign-in for a device code that gets no token (``refusal`` says why)."""

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


@dataclass
class _Pending:
    expires_at: float
    account: str | None = None


@dataclass
class DeviceCodes:
    """The device codes one server has handed out and not yet redeemed."""

    lifetime: float = DEVICE_CODE_SECONDS
    most: int = MAX_PENDING
    clock: Callable[[], float] = time.monotonic
    _pending: dict[str, _Pending] = field(default_factory=dict)

    def create(self) -> str:
        """A new device code (a random UUID, as the reference's)."""
        now = self.clock()
        self._pending = {c: p for c, p in self._pending.items() if p.expires_at > now}
        if len(self._pending) >= self.most:
            raise TooManyDeviceLogins(
                f"{len(self._pending)} device logins await their sign-in: try again in a few minutes"
            )
        code = str(uuid.uuid4())
        self._pending[code] = _Pending(now + self.lifetime)
        return code

    def _live(self, code: str) -> _Pending:
        pending = self._pending.get(code)
        if pending is None:
            raise DeviceLoginError(Refusal.DENIED, "unknown or already used device code")
        if pending.expires_at <= self.clock():
            del self._pending[code]
            raise DeviceLoginError(Refusal.EXPIRED, "the device code expired: log in again")
        return pending

    def check(self, code: str) -> None:
        """Nothing if ``code`` awaits its sign-in; else the ``DeviceLoginError``."""
        pending = self._live(code)
        if pending.account is not None:
            raise DeviceLoginError(Refusal.DENIED, "this device code is already signed in")

    async def redeem(self, node: Node, code: str) -> IssuedToken:
        """A new token of the account signed in for ``code``, once: the code is then gone."""
        pending = self._live(code)
        if pending.account is None:
            raise DeviceLoginError(Refusal.PENDING, "the sign-in is not done yet")
        del self._pending[code]
        return await create_token(
            node, pending.account, label="login", lifetime=LOGIN_TOKEN_LIFETIME
        )

    async def sign_in(self, node: Node, code: str, login: str, password: str) -> str:
        """Signs ``login`` in with ``password`` for ``code``: the account's name
        (``LoginRejected`` for wrong credentials; the code then still waits)."""
        self.check(code)
        record = await check_password(node, login, password)
        if record is None:
            raise LoginRejected("invalid login or password")
        self.check(code)  # the code may have expired while the password was checked
        self._pending[code].account = record.name
        return record.name
