"""The ``write_log`` table: the audit trail of writes, rows in, records out, no policy (who
counts as the actor is :mod:`odfd.app.write_log`'s to say)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import aiosqlite

from storage.catalog.catalog import Catalog
from storage.catalog.columns import from_text, to_text


@dataclass(frozen=True, slots=True)
class WriteRecord:
    at: datetime
    action: str
    account: str
    via: str
    target: str
    dataset_id: str | None = None
    old_head: str | None = None
    new_head: str | None = None


_COLUMNS = "at, action, account, via, target, dataset_id, old_head, new_head"


def _record(row: aiosqlite.Row) -> WriteRecord:
    return WriteRecord(from_text(row[0]), *row[1:])


class WriteLogTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def add(self, record: WriteRecord) -> None:
        await self._sql.execute(
            f"INSERT INTO write_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                to_text(record.at),
                record.action,
                record.account,
                record.via,
                record.target,
                record.dataset_id,
                record.old_head,
                record.new_head,
            ),
        )

    async def of_dataset(self, dataset_id: str) -> list[WriteRecord]:
        """The writes of one dataset, oldest first."""
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM write_log WHERE dataset_id = ? ORDER BY seq", (dataset_id,)
        )
        return [_record(row) for row in rows]

    async def of_target(self, target: str) -> list[WriteRecord]:
        """The writes of a dataset alias or resource (``Kind:name``), oldest first."""
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM write_log WHERE target = ? ORDER BY seq", (target,)
        )
        return [_record(row) for row in rows]
