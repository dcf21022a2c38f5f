"""A dataset as ``list`` reports it, from its catalog record alone: kept apart from
``odfd.app.datasets`` so ``odfd list`` builds its rows without loading the workspace's code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.catalog import DatasetRecord


def dataset_row(record: DatasetRecord) -> dict[str, Any]:
    return {
        "id": str(record.id),
        "alias": record.alias,
        "kind": record.kind.value,
        "head": None if record.head is None else str(record.head),
        "blocks": None if record.head_sequence is None else record.head_sequence + 1,
        "created": record.created_at.isoformat().replace("+00:00", "Z"),
        "updated": record.updated_at.isoformat().replace("+00:00", "Z"),
    }
