"""Who may use the resource protocol: the one place that decides, so a per-account decision can
replace it whole. Today's rule is the node's token lists: reading resources needs a token that
may read private data (read or admin, or an issued account's token), writing needs an admin
token (``[server] admin_tokens`` or an admin account's token)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aiohttp import web

from odfd.app.accounts import subject_of
from odfd.app.resources import DEFAULT_ACCOUNT
from odfd.server.state import STATE_KEY, bearer_token
from protocol.identity import AccountName

if TYPE_CHECKING:
    from odfd.app.node import Node


@dataclass(frozen=True, slots=True)
class Requester:
    account: AccountName | None
    """The token's account (None: the node's own)."""
    is_admin: bool
    """An admin acts on any account's resources; anyone else on their own only."""


@dataclass(frozen=True, slots=True)
class Denied(Exception):
    status: int
    """401: no usable token; 403: a token that may not do this."""
    message: str


class ResourceAccess(Protocol):
    async def authorize(self, request: web.Request, *, write: bool) -> Requester:
        """Who asks, or :class:`Denied`."""
        ...


class TokenAccess:
    def __init__(self, node: Callable[[], Node]) -> None:
        self._node = node

    async def authorize(self, request: web.Request, *, write: bool) -> Requester:
        config = request.app[STATE_KEY].config
        token = bearer_token(request)
        subject = await subject_of(self._node(), config, token)
        if subject is None:
            raise Denied(
                401, "the resource protocol needs a bearer token (Authorization: Bearer …)"
            )
        if write and not subject.is_admin:
            raise Denied(403, "changing resources needs an admin token")
        push_only = token in config.push_tokens and not config.may_read_private(token)
        if not write and push_only and not subject.is_admin:
            raise Denied(403, "reading resources needs a read or admin token")
        name = AccountName(subject.name)
        return Requester(None if name == DEFAULT_ACCOUNT else name, subject.is_admin)
