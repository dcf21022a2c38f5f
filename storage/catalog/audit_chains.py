"""The ``audit_chains`` table: per dataset, the newest block whose whole history an integrity audit
verified, with an opaque record of what the verifier needs to resume from it.

Rows are sealed with HMAC-SHA3-256 under the audit-state key (``storage.catalog.audit_files``), so
editing the catalog cannot make an audit skip blocks it never verified: a row whose seal does not
hold reads as missing, and the audit checks the whole chain.
"""

from __future__ import annotations

import hashlib
import hmac

from protocol.identity import DatasetId, Multihash
from storage.catalog.catalog import Catalog
from storage.catalog.columns import hash_from_text, hash_to_text, now_text


class AuditChainTable:
    """One sealed ``(head, record)`` per dataset; the latest save wins."""

    def __init__(self, catalog: Catalog, key: bytes) -> None:
        self._sql = catalog.sql
        self._key = key

    def _seal(self, dataset_id: DatasetId, head: Multihash, record: bytes) -> bytes:
        message = b"\0".join([str(dataset_id).encode(), head.to_bytes(), record])
        return hmac.new(self._key, message, hashlib.sha3_256).digest()

    async def load(self, dataset_id: DatasetId) -> tuple[Multihash, bytes] | None:
        """The dataset's head and record, or ``None`` if there is none or its seal fails."""
        row = await self._sql.fetchone(
            "SELECT head, record, seal FROM audit_chains WHERE dataset_id = ?", (str(dataset_id),)
        )
        if row is None:
            return None
        head_text, record, seal = row
        try:
            head = hash_from_text(head_text)
        except ValueError:
            return None
        if head is None or not isinstance(record, bytes) or not isinstance(seal, bytes):
            return None
        if not hmac.compare_digest(seal, self._seal(dataset_id, head, record)):
            return None
        return head, record

    async def save(self, dataset_id: DatasetId, head: Multihash, record: bytes) -> None:
        await self._sql.execute(
            "INSERT INTO audit_chains (dataset_id, head, record, seal, verified_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (dataset_id) DO UPDATE SET head = excluded.head,"
            " record = excluded.record, seal = excluded.seal, verified_at = excluded.verified_at",
            (
                str(dataset_id),
                hash_to_text(head),
                record,
                self._seal(dataset_id, head, record),
                now_text(),
            ),
        )

    async def forget(self, dataset_id: DatasetId) -> None:
        await self._sql.execute("DELETE FROM audit_chains WHERE dataset_id = ?", (str(dataset_id),))
