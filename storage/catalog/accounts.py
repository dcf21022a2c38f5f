"""The ``accounts`` and ``access_tokens`` tables: rows in, records out, no policy.

Hashing passwords and tokens, expiry and validation belong to :mod:`odfd.app.accounts`; this
module stores what it is given."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import aiosqlite

from storage.catalog.catalog import Catalog
from storage.catalog.columns import from_text, to_text
from storage.errors import StorageError


class AccountExistsError(StorageError):
    """An account of that name (or id) is already in the catalog."""


@dataclass(frozen=True, slots=True)
class AccountRecord:
    name: str
    id: str
    display_name: str
    email: str | None
    avatar_url: str | None
    password_hash: str | None
    is_admin: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: str
    account: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


_ACCOUNT_COLUMNS = "name, id, display_name, email, avatar_url, password_hash, is_admin, created_at"
_TOKEN_COLUMNS = "id, account, label, created_at, expires_at, revoked_at"


def _account(row: aiosqlite.Row) -> AccountRecord:
    return AccountRecord(
        row[0], row[1], row[2], row[3], row[4], row[5], bool(row[6]), from_text(row[7])
    )


def _token(row: aiosqlite.Row) -> TokenRecord:
    return TokenRecord(
        row[0], row[1], row[2], from_text(row[3]), from_text(row[4]), from_text(row[5])
    )


class AccountTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def add(self, record: AccountRecord) -> None:
        try:
            await self._sql.execute(
                f"INSERT INTO accounts ({_ACCOUNT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.name,
                    record.id,
                    record.display_name,
                    record.email,
                    record.avatar_url,
                    record.password_hash,
                    int(record.is_admin),
                    to_text(record.created_at),
                ),
            )
        except aiosqlite.IntegrityError:
            raise AccountExistsError(f"account {record.name!r} already exists") from None

    async def get(self, name: str) -> AccountRecord | None:
        row = await self._sql.fetchone(
            f"SELECT {_ACCOUNT_COLUMNS} FROM accounts WHERE name = ?", (name,)
        )
        return None if row is None else _account(row)

    async def all(self) -> list[AccountRecord]:
        rows = await self._sql.fetchall(f"SELECT {_ACCOUNT_COLUMNS} FROM accounts ORDER BY name")
        return [_account(row) for row in rows]

    async def set_password_hash(self, name: str, password_hash: str) -> bool:
        changes = await self._sql.execute(
            "UPDATE accounts SET password_hash = ? WHERE name = ?", (password_hash, name)
        )
        return changes.rowcount == 1

    async def remove(self, name: str) -> bool:
        changes = await self._sql.execute("DELETE FROM accounts WHERE name = ?", (name,))
        return changes.rowcount == 1

    async def add_token(self, record: TokenRecord, token_hash: str) -> None:
        await self._sql.execute(
            f"INSERT INTO access_tokens ({_TOKEN_COLUMNS}, token_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                record.id,
                record.account,
                record.label,
                to_text(record.created_at),
                None if record.expires_at is None else to_text(record.expires_at),
                None,
                token_hash,
            ),
        )

    async def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        row = await self._sql.fetchone(
            f"SELECT {_TOKEN_COLUMNS} FROM access_tokens WHERE token_hash = ?", (token_hash,)
        )
        return None if row is None else _token(row)

    async def tokens(self, account: str) -> list[TokenRecord]:
        rows = await self._sql.fetchall(
            f"SELECT {_TOKEN_COLUMNS} FROM access_tokens WHERE account = ? ORDER BY created_at, id",
            (account,),
        )
        return [_token(row) for row in rows]

    async def revoke_token(self, account: str, token_id: str, at: datetime) -> bool:
        changes = await self._sql.execute(
            "UPDATE access_tokens SET revoked_at = ? "
            "WHERE id = ? AND account = ? AND revoked_at IS NULL",
            (to_text(at), token_id, account),
        )
        return changes.rowcount == 1
