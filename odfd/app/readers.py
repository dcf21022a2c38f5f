"""Which derivative datasets read which: what ``delete`` and ``add --replace`` check before they
remove a dataset, so that no derivative is left reading one that is gone."""

from __future__ import annotations

from protocol.identity import DatasetId
from storage.catalog import DatasetRecord
from storage.workspace import Workspace


async def readers_of(
    workspace: Workspace, records: list[DatasetRecord]
) -> dict[DatasetId, list[DatasetRecord]]:
    """For each dataset, the derivative datasets whose transform reads it."""
    readers: dict[DatasetId, list[DatasetRecord]] = {}
    for record in records:
        if record.head is None:
            continue
        state = await workspace.open_dataset(record.id).chain.state()
        for input_id in state.transform_input_ids:
            readers.setdefault(input_id, []).append(record)
    return readers


def blocked_by_readers(
    doomed: list[DatasetRecord], readers: dict[DatasetId, list[DatasetRecord]]
) -> dict[str, list[str]]:
    """Alias of each doomed dataset that a dataset outside ``doomed`` reads, with those readers."""
    doomed_ids = {r.id for r in doomed}
    blocked = {
        r.alias: sorted(d.alias for d in readers.get(r.id, []) if d.id not in doomed_ids)
        for r in doomed
    }
    return {alias: names for alias, names in blocked.items() if names}


def downstream_first(
    doomed: list[DatasetRecord], readers: dict[DatasetId, list[DatasetRecord]]
) -> list[DatasetRecord]:
    """Readers before what they read, so that no step deletes a dataset something still reads."""
    ids = {r.id for r in doomed}
    order: list[DatasetRecord] = []
    seen: set[DatasetId] = set()

    def visit(record: DatasetRecord) -> None:
        if record.id in seen:
            return
        seen.add(record.id)
        for reader in readers.get(record.id, []):
            if reader.id in ids:
                visit(reader)
        order.append(record)

    for record in doomed:
        visit(record)
    return order
