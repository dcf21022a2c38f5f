"""One audit of one dataset as a daemon schedules them: ``odfd verify`` of that dataset in one of
two scopes, its report summarized into the record the catalog keeps. The daemon
(``odfd.daemon.audits``) says when, bounds the engine work and stores the record.

``integrity`` is the metadata and data layers, incremental (only data files new or changed since
they last verified are read); ``full`` is every layer, reproducibility included, every file read
again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from odfd.app.mirror_sync import describe_error
from odfd.app.verify import VerifyRequest, summarize, verify
from protocol.model import DatasetKind
from storage.catalog.audit_records import AuditRecord, Scope

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord


def needs_engine(record: DatasetRecord, scope: Scope) -> bool:
    """Whether the audit runs an engine: only re-executing transforms does (a full audit of a
    derivative)."""
    return scope == "full" and record.kind is DatasetKind.DERIVATIVE


async def audit_dataset(
    node: Node,
    record: DatasetRecord,
    scope: Scope,
    trigger: str,
    *,
    jobs: int,
    started: datetime,
) -> AuditRecord:
    """Audits ``record`` at ``scope`` (``jobs`` workers) and returns the record of it, begun at
    ``started`` and asked for by ``trigger``; an audit that cannot run is recorded as an
    ``error`` with why."""
    request = VerifyRequest(
        (str(record.id),), integrity_only=scope == "integrity", jobs=jobs, full=scope == "full"
    )
    report_json: str | None = None
    try:
        report = await verify(node, request)
        status = next(
            (str(d.status) for d in report.datasets if d.dataset_id == record.id),
            str(report.status),
        )
        summary = summarize(report, record.id)
        report_json = report.dumps(None)
    except Exception as err:  # noqa: BLE001 - an audit that cannot run is recorded as such
        status, summary = "error", describe_error(err)
    return AuditRecord(
        dataset_id=record.id,
        alias=record.alias,
        scope=scope,
        trigger=trigger,
        head=record.head,
        started_at=started,
        finished_at=datetime.now(UTC),
        status=status,  # type: ignore[arg-type]  # a report's status strings are the catalog's AuditStatus values
        summary=summary,
        report=report_json,
    )
