"""The ``signed_heads`` and ``mirror_freeze_bounds`` tables (migration ``0005_signed_heads.sql``).

Per dataset, the newest owner-signed head this node has seen: what a pull compares a remote's
signed head with to refuse rollbacks and forks, and what freeze reports are measured from. The
stored document is parsed and verified again on every read, so a damaged row is an error, never
a trusted value.
"""

from __future__ import annotations

from protocol.identity import DatasetId
from protocol.transfer.signed_head import SignedHead
from storage.catalog.catalog import Catalog
from storage.catalog.columns import now_text
from storage.catalog.signed_head_records import (
    ALL_SIGNED_HEADS_QUERY,
    FREEZE_BOUNDS_QUERY,
    SeenSignedHead,
    freeze_bounds,
    seen_signed_head,
    signed_heads,
)


class SignedHeadTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def get(self, dataset_id: DatasetId) -> SeenSignedHead | None:
        row = await self._sql.fetchone(
            "SELECT document, source, received_at FROM signed_heads WHERE dataset_id = ?",
            (str(dataset_id),),
        )
        return (
            None if row is None else seen_signed_head(row, f"catalog signed head of {dataset_id}")
        )

    async def all(self) -> dict[DatasetId, SeenSignedHead]:
        return signed_heads(await self._sql.fetchall(ALL_SIGNED_HEADS_QUERY))

    async def record(self, signed: SignedHead, source: str | None) -> bool:
        """Remember ``signed`` unless a newer (or equally new) one is already recorded; returns
        whether it was stored. The comparison is in the statement, so racing pulls cannot move
        the record backwards."""
        changes = await self._sql.execute(
            "INSERT INTO signed_heads (dataset_id, head, sequence_number, signed_at_nanos,"
            " document, source, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (dataset_id) DO UPDATE SET head = excluded.head,"
            " sequence_number = excluded.sequence_number,"
            " signed_at_nanos = excluded.signed_at_nanos, document = excluded.document,"
            " source = excluded.source, received_at = excluded.received_at"
            " WHERE excluded.signed_at_nanos > signed_heads.signed_at_nanos",
            (
                str(signed.dataset_id),
                signed.head.to_multibase(),
                signed.sequence_number,
                signed.signed_at.epoch_nanos,
                signed.document(),
                source,
                now_text(),
            ),
        )
        return changes.rowcount > 0

    async def delete(self, dataset_id: DatasetId) -> None:
        await self._sql.execute("DELETE FROM signed_heads WHERE dataset_id = ?", (str(dataset_id),))

    # --- freeze bounds of mirrors --------------------------------------------------------------

    async def set_freeze_bound(self, mirror: str, seconds: float | None) -> None:
        """``None`` removes the mirror's own bound (``[sync] freeze_after`` applies)."""
        if seconds is None:
            await self._sql.execute("DELETE FROM mirror_freeze_bounds WHERE mirror = ?", (mirror,))
            return
        await self._sql.execute(
            "INSERT INTO mirror_freeze_bounds (mirror, freeze_seconds) VALUES (?, ?)"
            " ON CONFLICT (mirror) DO UPDATE SET freeze_seconds = excluded.freeze_seconds",
            (mirror, seconds),
        )

    async def freeze_bounds(self) -> dict[str, float]:
        """Mirror name (lower case) -> its own freeze bound in seconds."""
        return freeze_bounds(await self._sql.fetchall(FREEZE_BOUNDS_QUERY))
