"""Accounts on this node and the access tokens issued to them.

Passwords are kept only as argon2id hashes (``argon2-cffi``); access tokens are random strings
shown once, kept only as their SHA-256 and found by it, so no stored value lets anyone sign in.
The CLI and the servers call these use cases and render what they return."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from odfd.app.node import Node
from odfd.app.resources import DEFAULT_ACCOUNT, account_handle
from odfd.config import ServerConfig
from odfd.errors import ManifestError, OdfdError
from protocol.errors import ParseError
from protocol.identity import AccountName
from storage.catalog.accounts import AccountRecord, AccountTable, TokenRecord
from storage.workspace import Workspace

ADMIN_ACCOUNT = "admin"
"""The node's own administrator, created by ``odfd init``."""
TOKEN_PREFIX = "odfd_"
_HASHER = PasswordHasher()


class AccountError(OdfdError):
    """An account or token command that cannot be done (unknown account, bad name, …)."""


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token as issued: ``secret`` is shown once and never stored."""

    record: TokenRecord
    secret: str


def _table(node: Node) -> AccountTable:
    return AccountTable(node.workspace.catalog)


def _name(text: str) -> str:
    try:
        name = AccountName(text.lower())
        account_handle(name)
    except (ParseError, ManifestError) as err:
        raise AccountError(f"{text!r} is not a valid account name: {err}") from None
    return str(name)


def token_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def add_account(
    node: Node,
    name: str,
    *,
    password: str | None,
    display_name: str | None = None,
    email: str | None = None,
    avatar_url: str | None = None,
    is_admin: bool = False,
) -> AccountRecord:
    return await _add(
        node.workspace,
        name,
        password=password,
        display_name=display_name,
        email=email,
        avatar_url=avatar_url,
        is_admin=is_admin,
    )


async def add_admin_account(workspace: Workspace) -> AccountRecord:
    """The node's own administrator, made by ``odfd init`` without a password (``odfd account
    passwd admin`` sets one; ``odfd account token create admin`` issues a token)."""
    return await _add(workspace, ADMIN_ACCOUNT, password=None, is_admin=True)


async def _add(
    workspace: Workspace,
    name: str,
    *,
    password: str | None,
    display_name: str | None = None,
    email: str | None = None,
    avatar_url: str | None = None,
    is_admin: bool = False,
) -> AccountRecord:
    key = _name(name)
    record = AccountRecord(
        name=key,
        id=account_handle(AccountName(key)).id,
        display_name=display_name or name,
        email=email,
        avatar_url=avatar_url,
        password_hash=None if password is None else _HASHER.hash(password),
        is_admin=is_admin,
        created_at=datetime.now(UTC),
    )
    await AccountTable(workspace.catalog).add(record)
    return record


async def list_accounts(node: Node) -> list[AccountRecord]:
    return await _table(node).all()


async def require_account(node: Node, name: str) -> AccountRecord:
    record = await _table(node).get(_name(name))
    if record is None:
        raise AccountError(f"no account {name!r} on this node")
    return record


async def set_password(node: Node, name: str, password: str) -> None:
    if not await _table(node).set_password_hash(_name(name), _HASHER.hash(password)):
        raise AccountError(f"no account {name!r} on this node")


async def remove_account(node: Node, name: str) -> None:
    if not await _table(node).remove(_name(name)):
        raise AccountError(f"no account {name!r} on this node")


async def check_password(node: Node, name: str, password: str) -> AccountRecord | None:
    """The account when ``password`` is its password; None otherwise (unknown names cost a hash
    too, so timing does not tell which accounts exist)."""
    try:
        record = await _table(node).get(_name(name))
    except AccountError:
        record = None
    stored = None if record is None else record.password_hash
    try:
        _HASHER.verify(stored or _DUMMY_HASH, password)
    except (VerificationError, InvalidHashError):
        return None
    return record if stored is not None else None


_DUMMY_HASH = _HASHER.hash(secrets.token_urlsafe(16))


async def create_token(
    node: Node, account: str, *, label: str = "", lifetime: timedelta | None = None
) -> IssuedToken:
    record_account = await require_account(node, account)
    now = datetime.now(UTC)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = TokenRecord(
        id=secrets.token_hex(4),
        account=record_account.name,
        label=label,
        created_at=now,
        expires_at=None if lifetime is None else now + lifetime,
        revoked_at=None,
    )
    await _table(node).add_token(record, token_hash(secret))
    return IssuedToken(record, secret)


async def list_tokens(node: Node, account: str) -> list[TokenRecord]:
    return await _table(node).tokens((await require_account(node, account)).name)


async def revoke_token(node: Node, account: str, token_id: str) -> None:
    name = (await require_account(node, account)).name
    if not await _table(node).revoke_token(name, token_id, datetime.now(UTC)):
        raise AccountError(f"account {name!r} has no live token {token_id!r}")


async def account_for_token(node: Node, secret: str) -> AccountRecord | None:
    """The account a live (unexpired, unrevoked) token belongs to, or None."""
    return await token_account(node.workspace, secret)


async def token_account(workspace: Workspace, secret: str) -> AccountRecord | None:
    """:func:`account_for_token` for a caller holding the workspace, not a node (the transfer
    server)."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    record = await issued_token(workspace, secret)
    if record is None or record.revoked_at is not None:
        return None
    if record.expires_at is not None and record.expires_at <= datetime.now(UTC):
        return None
    return await AccountTable(workspace.catalog).get(record.account)


async def issued_token(workspace: Workspace, secret: str) -> TokenRecord | None:
    """The record of an issued token, live or not (its account, expiry, revocation), found by
    the secret's hash: the Flight SQL server keeps a session no longer than its token lives."""
    return await AccountTable(workspace.catalog).token_by_hash(token_hash(secret))


async def token_expired(workspace: Workspace, secret: str) -> bool:
    """Whether ``secret`` is an issued, unrevoked token past its expiry: every server refuses
    it as expired, not invalid (unknown or revoked), as the reference tells the two apart."""
    record = await issued_token(workspace, secret)
    return (
        record is not None
        and record.revoked_at is None
        and record.expires_at is not None
        and record.expires_at <= datetime.now(UTC)
    )


LOGIN_TOKEN_LIFETIME = timedelta(days=30)
"""How long a token issued by a password login lives (``odfd account token create`` chooses)."""


class LoginRejected(AccountError):
    """Wrong login or password (which of the two is never said)."""


async def login_with_password(node: Node, login: str, password: str) -> IssuedToken:
    record = await check_password(node, login, password)
    if record is None:
        raise LoginRejected("invalid login or password")
    return await create_token(node, record.name, label="login", lifetime=LOGIN_TOKEN_LIFETIME)


@dataclass(frozen=True, slots=True)
class Subject:
    """Who a request's bearer token speaks for."""

    name: str
    id: str
    display_name: str
    email: str | None = None
    avatar_url: str | None = None
    is_admin: bool = False


def in_token_list(token: str, tokens: Iterable[str]) -> bool:
    """Whether ``token`` is one of ``tokens`` (a ``[server]`` list), compared timing-safe
    against every one: how long it takes says nothing of how much of a listed token matched.
    Issued tokens are found by their hash instead (:func:`token_hash`)."""
    found = False
    for known in tokens:
        found |= hmac.compare_digest(token.encode(), known.encode())
    return found


async def subject_of(node: Node, server: ServerConfig, token: str | None) -> Subject | None:
    """The account ``token`` belongs to: an issued token's account, or, for a token of the
    ``[server]`` lists (``push_tokens``, ``read_tokens``, ``admin_tokens``), the built-in account
    that owns the datasets whose alias has no account part. ``server`` is the serving server's
    settings (``odfd ui`` adds its own token to the configured ones)."""
    if not token:
        return None
    record = await account_for_token(node, token)
    if record is not None:
        return Subject(
            record.name,
            record.id,
            record.display_name,
            record.email,
            record.avatar_url,
            record.is_admin,
        )
    if in_token_list(token, server.push_tokens | server.read_tokens | server.admin_tokens):
        handle = account_handle(DEFAULT_ACCOUNT)
        name = str(handle.name)
        return Subject(name, handle.id, name, is_admin=in_token_list(token, server.admin_tokens))
    return None
