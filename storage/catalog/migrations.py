"""Numbered SQL migrations: ``migrations/NNNN_name.sql``, each applied once, in order, atomically.

Later issues add tables by adding a file with the next number; a migration is never edited once
released. ``schema_migrations`` records what was applied. Applying takes SQLite's write lock
first (``BEGIN IMMEDIATE``), so processes opening a new catalog at once do not race.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from storage.errors import StorageError

if TYPE_CHECKING:
    import aiosqlite

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    folder = resources.files("storage.catalog") / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StorageError(
            f"catalog migrations must be numbered 1..n without gaps, found {versions}"
        )
    return found


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (``sqlite3.complete_statement`` decides)."""
    statements: list[str] = []
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                statements.append(pending.strip())
            pending = ""
    leftover = [
        line for line in pending.splitlines() if line.strip() and not line.strip().startswith("--")
    ]
    if leftover:
        raise StorageError(f"incomplete SQL statement at the end of a migration: {pending[:80]!r}")
    return statements


async def migrate(db: aiosqlite.Connection, migrations: list[Migration] | None = None) -> list[int]:
    """Apply pending migrations; returns the versions applied. ``db`` must be in autocommit mode."""
    migrations = load_migrations() if migrations is None else migrations
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    await db.execute("BEGIN IMMEDIATE")
    try:
        async with db.execute("SELECT version FROM schema_migrations") as cursor:
            applied = {row[0] for row in await cursor.fetchall()}
        newer = [v for v in applied if v > len(migrations)]
        if newer:
            raise StorageError(
                f"catalog has migration {max(newer)} but this odfd knows only {len(migrations)}: "
                "upgrade odfd"
            )
        done: list[int] = []
        for migration in migrations:
            if migration.version in applied:
                continue
            for statement in split_statements(migration.sql):
                await db.execute(statement)
            await db.execute(
                "INSERT INTO schema_migrations (version, name, applied_at)"
                " VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                (migration.version, migration.name),
            )
            done.append(migration.version)
        await db.execute("COMMIT")
        return done
    except BaseException:
        await db.execute("ROLLBACK")
        raise
