"""Who may use the daemon's admin socket: the node's own OS user, or a node admin's token.

The socket's mode (0600) already keeps other users out; the peer's credentials (``SO_PEERCRED``)
say it again, should the socket's folder be shared or its mode widened. A peer running as the
daemon's own user acts as the node's ``admin`` account; any other peer (root, say) must send an
``Authorization: Bearer`` token the node's one decision takes as a node admin's (an admin
account's issued token, or one of ``[server] admin_tokens``). Every request then runs as that
subject: what it writes is recorded in the audit trail as its account, with how it came
(``cli:<os user>`` for the node's user, ``admin-socket:uid <n>`` for another).

On a platform without ``SO_PEERCRED`` the socket's mode is the only check."""

from __future__ import annotations

import json
import os
import pwd
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler

from odfd.app.accounts import ADMIN_ACCOUNT
from odfd.app.authorization import Action, Policy, Principal, principal_of
from odfd.app.write_log import Actor, acting
from odfd.config import ServerConfig
from odfd.server.state import bearer_token
from storage.workspace import Workspace

_PEER_CREDENTIALS = struct.Struct("3i")
ADMIN_PRINCIPAL: web.RequestKey[Principal] = web.RequestKey("odfd_admin_principal", Principal)


def peer_uid(request: web.Request) -> int | None:
    """The OS user of the process at the other end of the request's Unix socket (None: not a
    Unix socket, or a platform that does not say)."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is None or sock.family != socket.AF_UNIX or not hasattr(socket, "SO_PEERCRED"):
        return None
    _pid, uid, _gid = _PEER_CREDENTIALS.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
    )
    return int(uid)


def daemon_uid() -> int:
    """The daemon's own OS user, whose processes act as the node's admin account."""
    return os.getuid()


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


@dataclass(frozen=True, slots=True)
class AdminSocketAuth:
    """The admin app's middleware. ``settings`` gives the workspace and the server settings at
    each request (a reload may change the token lists)."""

    settings: Callable[[], tuple[Workspace, ServerConfig]]

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        principal, actor = await self._subject(request)
        decision = Policy().decide_account(principal, Action.ADMIN, ADMIN_ACCOUNT)
        if not decision.allowed:
            raise _refused(
                web.HTTPForbidden,
                f"the admin socket takes the node's own user or a node admin's token; "
                f"{principal.label} is neither ({decision.reason})",
            )
        request[ADMIN_PRINCIPAL] = principal
        with acting(actor):
            return await handler(request)

    async def _subject(self, request: web.Request) -> tuple[Principal, Actor]:
        uid = peer_uid(request)
        if uid is None or uid == daemon_uid():
            user = _user_name(daemon_uid() if uid is None else uid)
            principal = Principal(ADMIN_ACCOUNT, is_admin=True, via=f"the node's user {user}")
            return principal, Actor(ADMIN_ACCOUNT, f"cli:{user}")
        workspace, server = self.settings()
        token = bearer_token(request)
        found = None if token is None else await principal_of(workspace, server, token)
        if found is None:
            raise _refused(
                web.HTTPUnauthorized,
                f"the admin socket's peer runs as {_user_name(uid)}, not as the node's user: "
                "it needs a node admin's bearer token (Authorization: Bearer …), and "
                + ("sent none" if token is None else "the one sent is not valid here"),
            )
        return found, Actor(found.label, f"admin-socket:uid {uid}")


def _refused(kind: Callable[..., web.HTTPException], message: str) -> web.HTTPException:
    return kind(text=json.dumps({"error": message}), content_type="application/json")
