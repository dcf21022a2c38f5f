"""The ``audits`` table: every audit the daemon ran, with the verifier's JSON report as is.

A dataset's health is its latest audit: ``failed`` marks it failing (with the summary as the
reason) until a later audit passes.
"""

from __future__ import annotations

from datetime import datetime

from protocol.identity import DatasetId
from storage.catalog.audit_records import (
    AUDIT_COLUMNS,
    LATEST_AUDITS_QUERY,
    AuditRecord,
    Scope,
    audit_record,
    latest_audits,
)
from storage.catalog.catalog import Catalog
from storage.catalog.columns import from_text, hash_to_text, to_text


class AuditTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def add(self, record: AuditRecord, *, keep: int) -> int:
        """Store ``record`` and drop the dataset's reports beyond the newest ``keep``."""
        async with self._sql.transaction():
            inserted = await self._sql.execute(
                "INSERT INTO audits (dataset_id, alias, scope, trigger, head, started_at, finished_at, status,"
                " summary, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(record.dataset_id),
                    record.alias,
                    record.scope,
                    record.trigger,
                    hash_to_text(record.head),
                    to_text(record.started_at),
                    to_text(record.finished_at),
                    record.status,
                    record.summary,
                    record.report,
                ),
            )
            await self._sql.execute(
                "DELETE FROM audits WHERE dataset_id = ? AND id NOT IN"
                " (SELECT id FROM audits WHERE dataset_id = ? ORDER BY id DESC LIMIT ?)",
                (str(record.dataset_id), str(record.dataset_id), keep),
            )
        assert inserted.lastrowid is not None  # an INSERT sets it
        return inserted.lastrowid

    async def latest(self, dataset_id: DatasetId, scope: Scope | None = None) -> AuditRecord | None:
        where, args = (
            ("AND scope = ?", (str(dataset_id), scope)) if scope else ("", (str(dataset_id),))
        )
        row = await self._sql.fetchone(
            f"SELECT {AUDIT_COLUMNS} FROM audits WHERE dataset_id = ? {where} ORDER BY id DESC LIMIT 1",
            args,
        )
        return None if row is None else audit_record(row)

    async def latest_all(self) -> dict[DatasetId, AuditRecord]:
        """Each dataset's newest audit."""
        return latest_audits(await self._sql.fetchall(LATEST_AUDITS_QUERY))

    async def count_failing(self) -> int:
        """Datasets whose newest audit failed (``AuditRecord.failing``), counted in SQL."""
        row = await self._sql.fetchone(
            "SELECT count(*) FROM audits WHERE id IN (SELECT max(id) FROM audits GROUP BY"
            " dataset_id) AND status IN ('failed', 'error')"
        )
        assert row is not None  # count(*) always answers one row
        return int(row[0])

    async def last_full(self) -> dict[DatasetId, datetime]:
        """When each dataset last had a full audit (the audit schedule resumes from it)."""
        rows = await self._sql.fetchall(
            "SELECT dataset_id, max(started_at) FROM audits WHERE scope = 'full' GROUP BY dataset_id"
        )
        return {DatasetId.parse(row[0]): from_text(row[1]) for row in rows}

    async def history(self, dataset_id: DatasetId, *, limit: int = 20) -> list[AuditRecord]:
        rows = await self._sql.fetchall(
            f"SELECT {AUDIT_COLUMNS}, report FROM audits WHERE dataset_id = ? ORDER BY id DESC LIMIT ?",
            (str(dataset_id), limit),
        )
        return [audit_record(row, row[10]) for row in rows]
