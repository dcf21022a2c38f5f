"""What ``odfd status`` and the admin API's ``GET /status`` report: every dataset with its head,
last sync and last audit, its IPNS name (its DID's) and when this node last republished its
record, every mirror with its schedule and lag behind its source, and, when a
daemon runs, its queues. Built from the catalog, so it works whether or not a daemon runs; the
command without a daemon reads the rows with plain sqlite3 (no event loop to start)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from odfd.app.trust_status import trust_entry
from odfd.config import SyncConfig, format_duration

if TYPE_CHECKING:
    from protocol.identity import DatasetId
    from storage.catalog.audit_records import AuditRecord
    from storage.catalog.mirror_records import MirrorRecord, SyncAttempt
    from storage.catalog.records import DatasetRecord
    from storage.catalog.signed_head_records import SeenSignedHead
    from storage.catalog.sync_reader import SyncCatalogReader
    from storage.layout import WorkspaceLayout
    from storage.workspace import Workspace

_COMPOSED_ON_THE_LOOP = 500
"""Entries above which the daemon composes a status on a worker thread: 10,000 mirrors take most
of a second of CPU, and requests being served get their turns meanwhile."""


@dataclass(frozen=True, slots=True)
class StatusRows:
    """The catalog rows a status is composed from."""

    datasets: list[DatasetRecord]
    signed_heads: dict[DatasetId, SeenSignedHead]
    freeze_bounds: dict[str, float]
    mirrors: list[MirrorRecord]
    attempts: dict[str, SyncAttempt]
    audits: dict[DatasetId, AuditRecord]
    republished: dict[DatasetId, datetime]
    """When this node last (re)published each dataset's IPNS record (``odfd.sync.did_names``)."""


async def read_status_rows(workspace: Workspace) -> StatusRows:
    import asyncio

    from storage.catalog.audits import AuditTable
    from storage.catalog.mirrors import MirrorTable

    mirrors = MirrorTable(workspace.catalog)
    datasets = await workspace.list_datasets()
    return StatusRows(
        datasets=datasets,
        signed_heads=await workspace.signed_heads.all(),
        freeze_bounds=await workspace.signed_heads.freeze_bounds(),
        mirrors=await mirrors.list(),
        attempts=await mirrors.latest_attempts(),
        audits=await AuditTable(workspace.catalog).latest_all(),
        republished=await asyncio.to_thread(_republished, workspace.layout, datasets),
    )


def read_status_rows_now(
    catalog: SyncCatalogReader, layout: WorkspaceLayout | None = None
) -> StatusRows:
    """:func:`read_status_rows` without an event loop (``layout``: where the datasets' own
    state is read from; ``None``: no republish times)."""
    datasets = catalog.list_datasets()
    return StatusRows(
        datasets=datasets,
        signed_heads=catalog.signed_heads(),
        freeze_bounds=catalog.freeze_bounds(),
        mirrors=catalog.mirrors(),
        attempts=catalog.latest_attempts(),
        audits=catalog.latest_audits(),
        republished={} if layout is None else _republished(layout, datasets),
    )


def _republished(
    layout: WorkspaceLayout, datasets: list[DatasetRecord]
) -> dict[DatasetId, datetime]:
    from odfd.sync.did_names import republished_at

    found = {}
    for record in datasets:
        when = republished_at(layout.dataset(record.id).root / "info")
        if when is not None:
            found[record.id] = when
    return found


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds").replace("+00:00", "Z")


async def build_status(
    workspace: Workspace,
    daemon: dict[str, Any] | None = None,
    next_runs: dict[str, datetime] | None = None,
    withheld: set[str] | None = None,
    freeze_after: float | None = None,
) -> dict[str, Any]:
    """:func:`compose_status` of the workspace's catalog as it is now; ``freeze_after`` is the
    node's ``[sync] freeze_after`` (``None``: its default)."""
    import asyncio

    rows = await read_status_rows(workspace)
    if freeze_after is None:
        freeze_after = SyncConfig().freeze_after
    arguments = (rows, freeze_after, daemon, next_runs, withheld)
    if len(rows.datasets) + len(rows.mirrors) > _COMPOSED_ON_THE_LOOP:
        return await asyncio.to_thread(compose_status, *arguments)
    return compose_status(*arguments)


def compose_status(
    rows: StatusRows,
    freeze_after: float,
    daemon: dict[str, Any] | None = None,
    next_runs: dict[str, datetime] | None = None,
    withheld: set[str] | None = None,
) -> dict[str, Any]:
    """``next_runs`` (mirror name -> due time) and ``withheld`` (dataset ids) come from a running
    daemon; without one, the schedule stored in the catalog is shown. ``freeze_after`` is
    ``[sync] freeze_after``; a mirror's own bound wins."""
    from storage.ipns_name import ipns_name_of

    signed_heads, bounds, mirrors = rows.signed_heads, rows.freeze_bounds, rows.mirrors
    attempts, audits = rows.attempts, rows.audits
    by_alias = {m.name.lower(): m for m in mirrors}
    datasets_out = []
    sequences: dict[str, int | None] = {}
    trust_by_alias: dict[str, dict[str, Any]] = {}
    for record in rows.datasets:
        sequences[record.alias.lower()] = record.head_sequence
        mirror = by_alias.get(record.alias.lower())
        attempt = attempts.get(mirror.name) if mirror else None
        audit = audits.get(record.id)
        bound = bounds.get(record.alias.lower(), freeze_after) if mirror else freeze_after
        trust = trust_entry(signed_heads.get(record.id), record.head, bound)
        trust_by_alias[record.alias.lower()] = trust
        datasets_out.append(
            {
                "alias": record.alias,
                "id": str(record.id),
                "kind": record.kind.value,
                "head": None if record.head is None else record.head.to_multibase(),
                "sequenceNumber": record.head_sequence,
                "mirrorOf": mirror.source if mirror else None,
                "lastSync": None
                if attempt is None
                else {
                    "at": _time(attempt.finished_at),
                    "outcome": attempt.outcome,
                    "error": attempt.error,
                },
                "lagBlocks": _lag(mirror.source_sequence if mirror else None, record.head_sequence),
                "lastAudit": None
                if audit is None
                else {
                    "at": _time(audit.finished_at),
                    "scope": audit.scope,
                    "status": audit.status,
                    "head": None if audit.head is None else audit.head.to_multibase(),
                    "summary": audit.summary,
                },
                "ipns": {
                    "name": str(ipns_name_of(record.id)),
                    "lastRepublished": _time(rows.republished.get(record.id)),
                },
                "failing": bool(audit and audit.failing),
                "withheld": str(record.id) in (withheld or set()),
                "trust": trust,
            }
        )
    mirrors_out = []
    for mirror in mirrors:
        attempt = attempts.get(mirror.name)
        due = (next_runs or {}).get(mirror.name, mirror.next_run_at)
        mirrors_out.append(
            {
                "name": mirror.name,
                "source": mirror.source,
                "targets": list(mirror.targets),
                "every": format_duration(mirror.interval),
                "paused": mirror.paused,
                "managedBy": mirror.resource_id,
                "nextRunAt": None if mirror.paused else _time(due),
                "lastAttemptAt": _time(mirror.last_attempt_at),
                "lastOutcome": None if attempt is None else attempt.outcome,
                "lastSuccessAt": _time(mirror.last_success_at),
                "consecutiveFailures": mirror.consecutive_failures,
                "lastError": mirror.last_error,
                "sourceHead": None
                if mirror.source_head is None
                else mirror.source_head.to_multibase(),
                "sourceSequenceNumber": mirror.source_sequence,
                "lagBlocks": _lag(mirror.source_sequence, sequences.get(mirror.name.lower())),
                "trust": trust_by_alias.get(mirror.name.lower(), {"state": "unsigned"}),
                "targetsState": {
                    target: {
                        "head": None if s.head is None else s.head.to_multibase(),
                        "remote": s.remote,
                        "error": s.error,
                    }
                    for target, s in mirror.target_state.items()
                },
            }
        )
    return {
        "daemon": daemon or {"running": False},
        "datasets": datasets_out,
        "mirrors": mirrors_out,
    }


def _lag(source_sequence: int | None, local_sequence: int | None) -> int | None:
    """Blocks the local copy is behind the source head last seen (unknown before the first check)."""
    if source_sequence is None:
        return None
    return max(source_sequence - (-1 if local_sequence is None else local_sequence), 0)
