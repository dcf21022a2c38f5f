"""A read-only catalog connection of its own, for lookups that must not queue behind writers.

The node's ``Catalog`` runs every statement of a process on one connection, one transaction at a
time: while a sync holds ``BEGIN IMMEDIATE … COMMIT`` open across awaits, every other statement of
the process waits for it. Serving a dataset needs only its row, and under WAL a second connection
reads the last committed state without waiting for any writer; so the server resolves names
through a ``CatalogReader`` (its own aiosqlite thread, ``query_only``) and never shares a queue
with the daemon's burst of syncs.
"""

from __future__ import annotations

from pathlib import Path

import aiosqlite

from protocol.identity import DatasetId
from storage.catalog.catalog import DATASET_COLUMNS, DatasetRecord, dataset_record


class CatalogReader:
    """Lookups of dataset rows on a connection that can only read."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> CatalogReader:
        """``path`` is an open catalog (its schema migrated, in WAL mode)."""
        db = await aiosqlite.connect(path, isolation_level=None)
        try:
            await db.execute("PRAGMA busy_timeout = 10000")
            await db.execute("PRAGMA query_only = ON")
        except BaseException:
            await db.close()
            raise
        return cls(db)

    async def close(self) -> None:
        await self._db.close()

    async def get_dataset(self, id: DatasetId) -> DatasetRecord | None:
        return await self._one(f"SELECT {DATASET_COLUMNS} FROM datasets WHERE id = ?", str(id))

    async def find_by_alias(self, alias: str) -> DatasetRecord | None:
        return await self._one(f"SELECT {DATASET_COLUMNS} FROM datasets WHERE alias = ?", alias)

    async def _one(self, sql: str, key: str) -> DatasetRecord | None:
        async with self._db.execute(sql, (key,)) as cursor:
            row = await cursor.fetchone()
        return None if row is None else dataset_record(row)
