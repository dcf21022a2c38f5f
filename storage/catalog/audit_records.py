"""The ``audits`` table's rows as records, and the query of each dataset's newest audit, shared by
:class:`storage.catalog.audits.AuditTable` and the CLI's synchronous
:mod:`storage.catalog.sync_reader`. Imports no aiosqlite."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from protocol.identity import DatasetId, Multihash
from storage.catalog.columns import from_text, hash_from_text

Scope = Literal["integrity", "full"]
AuditStatus = Literal["ok", "failed", "cannot-verify", "not-re-executable", "skipped", "error"]


@dataclass(frozen=True, slots=True)
class AuditRecord:
    dataset_id: DatasetId
    alias: str
    scope: Scope
    trigger: str
    head: Multihash | None
    started_at: datetime
    finished_at: datetime
    status: AuditStatus
    summary: str
    report: str | None = None
    """The verifier's JSON report (``None`` when the audit could not run)."""
    id: int | None = None

    @property
    def failing(self) -> bool:
        return self.status in ("failed", "error")


AUDIT_COLUMNS = (
    "id, dataset_id, alias, scope, trigger, head, started_at, finished_at, status, summary"
)


def audit_record(row: Sequence[Any], report: str | None = None) -> AuditRecord:
    return AuditRecord(
        id=row[0],
        dataset_id=DatasetId.parse(row[1]),
        alias=row[2],
        scope=row[3],
        trigger=row[4],
        head=hash_from_text(row[5]),
        started_at=from_text(row[6]),
        finished_at=from_text(row[7]),
        status=row[8],
        summary=row[9],
        report=report,
    )


LATEST_AUDITS_QUERY = f"SELECT {AUDIT_COLUMNS} FROM audits WHERE id IN (SELECT max(id) FROM audits GROUP BY dataset_id)"
"""Each dataset's newest audit."""


def latest_audits(rows: Iterable[Sequence[Any]]) -> dict[DatasetId, AuditRecord]:
    """Each dataset's newest audit, from :data:`LATEST_AUDITS_QUERY`'s rows."""
    return {record.dataset_id: record for record in map(audit_record, rows)}
