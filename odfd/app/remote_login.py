"""Logging in to a remote node (``odfd login``, ``odfd logout``): a token obtained from the node's
``POST /platform/login`` with a password, or given, is checked against its ``GET /accounts/me``
and kept in a login store (:mod:`odfd.app.login_store`), from which pull, push, search and
``sql --remote`` send it to that node and no other.

The reference's ``kamu login URL`` signs in through a browser (a device login); odfd's nodes
serve that for it (:mod:`odfd.app.device_login`), while ``odfd login`` asks for the password in
the terminal or takes an existing token."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from odfd.app.login_store import (
    LoginStoreError,
    Scope,
    StoredLogin,
    read_logins,
    store_path,
    write_logins,
)
from odfd.sync.errors import UnsupportedUrlError
from odfd.sync.transport.url import node_url

if TYPE_CHECKING:
    from odfd.app.node import Node

_TIMEOUT_SECONDS = 30.0


class RemoteLoginError(LoginStoreError):
    """The node refused the credentials or the token, or could not be asked."""


@dataclass(frozen=True, slots=True)
class Login:
    """A login as kept: where, as whom, in which store (never the token)."""

    url: str
    account: str
    scope: Scope
    saved_at: str


async def _request(
    method: str, url: str, *, token: str | None = None, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.request(method, url, json=body, headers=headers, allow_redirects=False) as reply,
        ):
            status, text = reply.status, await reply.text()
    except (aiohttp.ClientError, TimeoutError) as err:
        raise RemoteLoginError(f"cannot reach {url}: {err or type(err).__name__}") from None
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, None


async def check_reachable(url: str) -> None:
    """``RemoteLoginError`` in the words of a remote query (``cannot_reach``) when nothing
    answers HTTP at the node of ``url``: said before a password is asked for, not after. Any
    HTTP answer to ``GET`` of its root will do: a login is asked of the node itself next."""
    import aiohttp

    from odfd.app.remote_query import cannot_reach

    base = login_url(url)
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(base, allow_redirects=False),
        ):
            return
    except aiohttp.ClientConnectorError as err:
        raise RemoteLoginError(cannot_reach(base, err)) from None
    except (aiohttp.ClientError, TimeoutError) as err:
        raise RemoteLoginError(
            f"cannot reach the node at {base}: {err or type(err).__name__}"
        ) from None


def login_url(text: str) -> str:
    """The node's URL a login to ``text`` is kept for (``node_url``); ``RemoteLoginError``
    naming what a login's URL must be when ``text`` is not an HTTP node's."""
    try:
        return node_url(text)
    except UnsupportedUrlError:
        raise RemoteLoginError(
            f"{text}: a login goes to a node's http(s):// URL, without credentials or query "
            "(e.g. http://node:8080/)"
        ) from None


def _message(answer: Any) -> str:
    return str(answer.get("message")) if isinstance(answer, dict) and "message" in answer else ""


async def password_token(url: str, login: str, password: str) -> str:
    """A new token of ``login`` from the node at ``url`` (its ``POST /platform/login``)."""
    credentials = json.dumps({"login": login, "password": password})
    status, answer = await _request(
        "POST",
        url + "platform/login",
        body={"loginMethod": "password", "loginCredentialsJson": credentials},
    )
    if status == 200 and isinstance(answer, dict) and isinstance(answer.get("accessToken"), str):
        return str(answer["accessToken"])
    if status == 401:
        raise RemoteLoginError(f"{url}: invalid login or password")
    raise RemoteLoginError(f"{url}: login failed ({status}) {_message(answer)}".rstrip())


async def account_of(url: str, token: str) -> str:
    """The account ``token`` speaks for at the node at ``url`` (its ``GET /accounts/me``)."""
    status, answer = await _request("GET", url + "accounts/me", token=token)
    if status == 200 and isinstance(answer, dict) and isinstance(answer.get("accountName"), str):
        return str(answer["accountName"])
    if status == 401:
        raise RemoteLoginError(f"{url}: the token is invalid, expired or revoked")
    raise RemoteLoginError(f"{url}: cannot check the token ({status}) {_message(answer)}".rstrip())


async def log_in(
    node: Node,
    url: str,
    *,
    login: str | None = None,
    password: str | None = None,
    token: str | None = None,
    scope: Scope = Scope.WORKSPACE,
) -> Login:
    """Logs in to the node at ``url`` with ``login`` and ``password``, or with ``token`` (one
    from its device login: :mod:`odfd.app.remote_device_login`), and keeps the token in the
    ``scope`` store in place of any earlier one for that node."""
    base = login_url(url)
    if token is None:
        if login is None or password is None:
            raise RemoteLoginError("a login needs an account name and password, or a token")
        token = await password_token(base, login, password)
    account = await account_of(base, token)
    saved_at = datetime.now(UTC).isoformat(timespec="seconds")
    path = store_path(node.root, scope)
    kept = [e for e in read_logins(path) if e.url != base]
    write_logins(path, [*kept, StoredLogin(base, account, token, saved_at)])
    return Login(base, account, scope, saved_at)


def logins(node: Node) -> list[Login]:
    """Every kept login, the workspace's first."""
    return [
        Login(e.url, e.account, scope, e.saved_at)
        for scope in (Scope.WORKSPACE, Scope.USER)
        for e in read_logins(store_path(node.root, scope))
    ]


async def check(node: Node, url: str) -> Login:
    """The kept login for the node at ``url``, once the node confirmed whom its token speaks
    for (``RemoteLoginError`` when none is kept or the node refuses it)."""
    base = login_url(url)
    for scope in (Scope.WORKSPACE, Scope.USER):
        for entry in read_logins(store_path(node.root, scope)):
            if entry.url == base:
                account = await account_of(base, entry.token)
                return Login(base, account, scope, entry.saved_at)
    raise RemoteLoginError(f"not logged in to {base} (`odfd login {base}`)")


def log_out(node: Node, url: str | None, *, scope: Scope | None = None) -> list[Login]:
    """Forgets the login to the node at ``url`` (``None``: every login) in ``scope`` (``None``:
    both stores); the logins forgotten. The tokens stay valid on the node until they expire or
    its administrator revokes them (``odfd account token revoke``)."""
    base = None if url is None else login_url(url)
    gone: list[Login] = []
    for each in (Scope.WORKSPACE, Scope.USER):
        if scope is not None and each is not scope:
            continue
        path = store_path(node.root, each)
        entries = read_logins(path)
        dropped = [e for e in entries if base is None or e.url == base]
        if dropped:
            write_logins(path, [e for e in entries if e not in dropped])
            gone += [Login(e.url, e.account, each, e.saved_at) for e in dropped]
    if not gone and base is not None:
        raise RemoteLoginError(f"not logged in to {base}")
    return gone
