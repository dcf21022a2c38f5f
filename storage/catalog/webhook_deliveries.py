"""The ``webhook_deliveries`` table: each delivery to a webhook target and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from storage.catalog.catalog import Catalog


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    message_id: str
    target_id: str
    target_name: str
    event_type: str
    state: str
    """``pending``, ``delivered`` or ``failed``."""
    attempts: int
    last_status: int | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None


def _now() -> str:
    return datetime.now(UTC).isoformat()


class WebhookDeliveryTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def start(
        self, message_id: str, target_id: str, target_name: str, event_type: str
    ) -> None:
        await self._sql.execute(
            "INSERT INTO webhook_deliveries"
            " (message_id, target_id, target_name, event_type, state, created_at)"
            " VALUES (?, ?, ?, ?, 'pending', ?)",
            (message_id, target_id, target_name, event_type, _now()),
        )

    async def attempted(self, message_id: str, status: int | None, error: str | None) -> None:
        await self._sql.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status = ?, error = ?"
            " WHERE message_id = ?",
            (status, error, message_id),
        )

    async def finish(self, message_id: str, state: str) -> None:
        await self._sql.execute(
            "UPDATE webhook_deliveries SET state = ?, finished_at = ? WHERE message_id = ?",
            (state, _now(), message_id),
        )

    async def list(self, target_id: str | None = None, limit: int = 100) -> list[DeliveryRecord]:
        where, args = ("WHERE target_id = ?", [target_id]) if target_id else ("", [])
        rows = await self._sql.fetchall(
            "SELECT message_id, target_id, target_name, event_type, state, attempts,"
            f" last_status, error, created_at, finished_at FROM webhook_deliveries {where}"
            " ORDER BY created_at DESC, message_id LIMIT ?",
            (*args, limit),
        )
        return [
            DeliveryRecord(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                r[7],
                datetime.fromisoformat(r[8]),
                None if r[9] is None else datetime.fromisoformat(r[9]),
            )
            for r in rows
        ]
