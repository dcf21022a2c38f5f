"""The ``Synced`` and ``Audited`` conditions of a ``Mirror`` resource: what its last sync attempt
and its dataset's last audit came to, written into the resource's status (``odfd get``, the
resource protocol and the console show them). The daemon's mirror schedule calls these as each
attempt or audit ends; a mirror made by ``odfd mirror add`` has no resource and no condition.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from odfd.app.resources import AUDITED, SYNCED
from storage.catalog.mirrors import MirrorTable
from storage.catalog.resources import ResourceTable

if TYPE_CHECKING:
    from protocol.identity import Multihash
    from storage.catalog.audit_records import AuditRecord
    from storage.catalog.mirror_records import SyncAttempt
    from storage.workspace import Workspace


async def record_synced(
    workspace: Workspace, resource_id: str, attempt: SyncAttempt, source_head: Multihash | None
) -> None:
    """The mirror resource ``resource_id`` synced (or failed to) as ``attempt`` says, its source
    at ``source_head``."""
    await _set(
        workspace,
        resource_id,
        SYNCED,
        {
            "status": "False" if attempt.outcome in ("failed", "cancelled") else "True",
            "outcome": attempt.outcome,
            "message": attempt.error,
            "head": None if attempt.new_head is None else attempt.new_head.to_multibase(),
            "sourceHead": None if source_head is None else source_head.to_multibase(),
            "at": _rfc3339(attempt.finished_at),
        },
    )


async def record_audited(workspace: Workspace, audit: AuditRecord) -> None:
    """The audit's outcome on the resource of the mirror that brought the dataset, if one did."""
    mirror = await MirrorTable(workspace.catalog).get(audit.alias)
    if mirror is None or mirror.resource_id is None:
        return
    await _set(
        workspace,
        mirror.resource_id,
        AUDITED,
        {
            "status": "False" if audit.failing else "True",
            "scope": audit.scope,
            "result": audit.status,
            "message": audit.summary,
            "at": _rfc3339(audit.finished_at),
        },
    )


async def _set(workspace: Workspace, resource_id: str, key: str, value: dict[str, Any]) -> None:
    await ResourceTable(workspace.catalog).update_status(resource_id, conditions={key: value})


def _rfc3339(at: datetime) -> str:
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")
