"""The ``dataset_inputs`` table: each derivative's inputs as of a head, the index behind the
dataset graph (``storage.graph``; the migration says when rows are written and read again)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.identity import DatasetId, Multihash
from storage.catalog.catalog import Catalog
from storage.catalog.columns import hash_from_text, hash_to_text

IndexedInputs = tuple[Multihash, tuple[DatasetId, ...]]
"""The head the inputs were read at, and the inputs in the transform's order."""

_UPSERT = (
    "INSERT INTO dataset_inputs (dataset_id, head, inputs) VALUES (?, ?, ?)"
    " ON CONFLICT (dataset_id) DO UPDATE SET head = excluded.head, inputs = excluded.inputs"
)


class DatasetInputsTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def load(self) -> dict[DatasetId, IndexedInputs]:
        rows = await self._sql.fetchall("SELECT dataset_id, head, inputs FROM dataset_inputs")
        return {DatasetId.parse(row[0]): (hash_from_text(row[1]), _ids(row[2])) for row in rows}

    async def record(
        self, dataset_id: DatasetId, head: Multihash, inputs: Sequence[DatasetId]
    ) -> None:
        """The derivative ``dataset_id`` reads ``inputs`` at ``head``; the dataset must be in the
        catalog."""
        await self._sql.execute(_UPSERT, _row(dataset_id, head, inputs))

    async def replace(
        self, rows: Iterable[tuple[DatasetId, Multihash, Sequence[DatasetId]]]
    ) -> None:
        """Make the index exactly ``rows`` (``odfd repair``), in one transaction."""
        async with self._sql.transaction():
            await self._sql.execute("DELETE FROM dataset_inputs")
            await self._sql.executemany(_UPSERT, [_row(*row) for row in rows])


def _row(
    dataset_id: DatasetId, head: Multihash, inputs: Sequence[DatasetId]
) -> tuple[str, str | None, str]:
    return str(dataset_id), hash_to_text(head), " ".join(str(i) for i in inputs)


def _ids(text: str) -> tuple[DatasetId, ...]:
    return tuple(DatasetId.parse(part) for part in text.split())
