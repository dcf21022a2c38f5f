"""The ``chain_states`` table: each dataset's last saved chain state (``storage.chain.saved_state``).

The bytes are stored as given and parsed (and checked against the chain) only by the chain that
restores them, so a damaged row costs a recomputation, never a wrong state.
"""

from __future__ import annotations

from protocol.identity import DatasetId, Multihash
from storage.catalog.catalog import Catalog
from storage.catalog.columns import hash_to_text, now_text
from storage.chain.saved_state import SavedStateStore


class ChainStateTable(SavedStateStore):
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def load(self, dataset_id: DatasetId) -> bytes | None:
        row = await self._sql.fetchone(
            "SELECT state FROM chain_states WHERE dataset_id = ?", (str(dataset_id),)
        )
        if row is None:
            return None
        state = row[0]
        return state if isinstance(state, bytes) else str(state).encode("utf-8")

    async def save(self, dataset_id: DatasetId, head: Multihash, data: bytes) -> None:
        await self._sql.execute(
            "INSERT INTO chain_states (dataset_id, head, state, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (dataset_id) DO UPDATE SET"
            " head = excluded.head, state = excluded.state, updated_at = excluded.updated_at",
            (str(dataset_id), hash_to_text(head), data, now_text()),
        )

    async def delete(self, dataset_id: DatasetId) -> None:
        await self._sql.execute("DELETE FROM chain_states WHERE dataset_id = ?", (str(dataset_id),))
