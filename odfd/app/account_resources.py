"""``Account`` resources (``auth/v1alpha1``): an applied manifest creates or updates the account
row the node signs people in with.

The manifest's password was encrypted on apply (:mod:`odfd.app.secret_values`), so the resource
table never holds it in plain; here it is decrypted once and kept only as an argon2id hash. An
unchanged password keeps its stored hash (re-applying a manifest changes nothing)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from odfd.app.node_secrets import NodeSecrets, SecretError
from odfd.app.resources import account_handle, split_name
from odfd.errors import OdfdError
from protocol.identity import AccountName
from storage.catalog.accounts import AccountRecord, AccountTable
from storage.workspace import Workspace

_HASHER = PasswordHasher()


class AccountResourceError(OdfdError):
    """An ``Account`` resource the node cannot make happen (e.g. an undecryptable password)."""


def _same_password(stored: str | None, plain: str) -> bool:
    if stored is None:
        return False
    try:
        return _HASHER.verify(stored, plain)
    except (VerificationError, InvalidHashError):
        return False


async def reconcile_account(workspace: Workspace, name: str, spec: dict[str, Any]) -> None:
    """Make the account ``name`` say what ``spec`` does (creating it when missing)."""
    _, key = split_name(name)
    key = key.lower()
    plain = None
    if "password" in spec:
        try:
            plain = NodeSecrets(workspace.keys).decrypt(spec["password"]["value"])
        except SecretError as err:
            raise AccountResourceError(f"spec.password: {err}") from None
    table = AccountTable(workspace.catalog)
    display_name = str(spec.get("displayName") or key)
    email = spec.get("email")
    avatar = spec.get("avatarUrl")
    existing = await table.get(key)
    if existing is None:
        await table.add(
            AccountRecord(
                name=key,
                id=account_handle(AccountName(key)).id,
                display_name=display_name,
                email=email,
                avatar_url=avatar,
                password_hash=None if plain is None else _HASHER.hash(plain),
                is_admin=False,
                created_at=datetime.now(UTC),
            )
        )
        return
    await table.update_profile(key, display_name, email, avatar)
    if plain is not None and not _same_password(existing.password_hash, plain):
        await table.set_password_hash(key, _HASHER.hash(plain))
