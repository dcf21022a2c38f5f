"""Which dataset reads which: the dataset graph, from the catalog's index of each derivative's
inputs (``storage.catalog.dataset_inputs``), so that asking needs no chain read.

A ``DatasetGraph`` is a snapshot: the datasets of the catalog and each derivative's inputs at
its head. It answers every question the node asks of the graph — upstream order with the cycle
check (``pull --recursive``, push), readers (delete, ``add --replace``, ``reset``, the daemon's
derivative updates), downstream-first order (delete, replace, compact), lineage (the web console,
``odfd inspect``) — without I/O. ``load_graph`` builds it from the catalog, reading a chain only
for a derivative whose index row is missing or older than its head, and writing that row back.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from protocol.identity import DatasetId, Multihash
from protocol.model import DatasetKind
from storage.catalog.dataset_inputs import DatasetInputsTable
from storage.catalog.records import DatasetRecord
from storage.errors import DatasetNotFoundError, StorageError

_log = logging.getLogger(__name__)

InputsAt = Callable[[DatasetId, Multihash], Awaitable[tuple[DatasetId, ...]]]
"""Reads a derivative's inputs from its chain at a head (the chain state's input ids)."""


class DependencyCycleError(StorageError):
    """A dataset reads itself through its inputs."""

    def __init__(self, dataset_id: DatasetId) -> None:
        super().__init__(f"dataset {dataset_id} depends on itself through its inputs")
        self.dataset_id = dataset_id


class DatasetGraph:
    """The datasets and who reads whom; ``where`` names the workspace in errors."""

    def __init__(
        self,
        records: Iterable[DatasetRecord],
        inputs: Mapping[DatasetId, tuple[DatasetId, ...]],
        where: str = "",
    ) -> None:
        self.records = {record.id: record for record in records}
        """In the order given (the catalog lists datasets by alias)."""
        self._inputs = {i: inputs[i] for i in self.records if i in inputs}
        self.where = where
        self._readers: dict[DatasetId, list[DatasetRecord]] = {}
        for record in self.records.values():
            for input_id in self._inputs.get(record.id, ()):
                self._readers.setdefault(input_id, []).append(record)

    def only(self, keep: Callable[[DatasetRecord], bool]) -> DatasetGraph:
        """The graph of the datasets ``keep`` accepts; the others are as if not in the workspace."""
        return DatasetGraph(filter(keep, self.records.values()), self._inputs, self.where)

    def inputs_of(self, dataset_id: DatasetId) -> tuple[DatasetId, ...]:
        """What the dataset's transform reads, in its order (present in the workspace or not)."""
        return self._inputs.get(dataset_id, ())

    def readers_of(self, dataset_id: DatasetId) -> list[DatasetRecord]:
        """The derivatives whose transform reads the dataset."""
        return self._readers.get(dataset_id, [])

    def upstream_order(
        self, targets: Iterable[DatasetId], *, skip_missing: bool = False
    ) -> list[DatasetId]:
        """The targets and everything they read, each after all of its inputs.
        ``DependencyCycleError`` if a dataset reads itself; an input not in the workspace is
        ``DatasetNotFoundError`` unless ``skip_missing`` leaves it out."""
        order: dict[DatasetId, None] = {}
        visiting: set[DatasetId] = set()

        def visit(dataset_id: DatasetId) -> None:
            if dataset_id in order:
                return
            if dataset_id in visiting:
                raise DependencyCycleError(dataset_id)
            visiting.add(dataset_id)
            for input_id in self.inputs_of(dataset_id):
                if input_id in self.records:
                    visit(input_id)
                elif not skip_missing:
                    raise DatasetNotFoundError(
                        f"dataset {input_id} is not in the workspace {self.where}"
                    )
            visiting.discard(dataset_id)
            order[dataset_id] = None

        for target in targets:
            visit(target)
        return list(order)

    def downstream_of(self, records: Sequence[DatasetRecord]) -> list[DatasetRecord]:
        """Every dataset reading one of ``records``, directly or through others (``records``
        themselves left out)."""
        given = {record.id for record in records}
        found: dict[DatasetId, DatasetRecord] = {}
        pending = list(records)
        while pending:
            for reader in self.readers_of(pending.pop().id):
                if reader.id not in given and reader.id not in found:
                    found[reader.id] = reader
                    pending.append(reader)
        return list(found.values())

    def blocked_by_readers(self, doomed: Sequence[DatasetRecord]) -> dict[str, list[str]]:
        """Alias of each doomed dataset that a dataset outside ``doomed`` reads, with the
        aliases of those readers: what removing ``doomed`` would leave reading nothing."""
        doomed_ids = {record.id for record in doomed}
        blocked = {
            record.alias: sorted(
                reader.alias for reader in self.readers_of(record.id) if reader.id not in doomed_ids
            )
            for record in doomed
        }
        return {alias: names for alias, names in blocked.items() if names}

    def downstream_first(self, records: Sequence[DatasetRecord]) -> list[DatasetRecord]:
        """``records`` with readers before what they read, so that no step removes or rewrites a
        dataset another of them still reads."""
        ids = {record.id for record in records}
        order: list[DatasetRecord] = []
        seen: set[DatasetId] = set()

        def visit(record: DatasetRecord) -> None:
            if record.id in seen:
                return
            seen.add(record.id)
            for reader in self.readers_of(record.id):
                if reader.id in ids:
                    visit(reader)
            order.append(record)

        for record in records:
            visit(record)
        return order

    def lineage(
        self, start: DatasetId, *, downstream: bool = False
    ) -> list[tuple[DatasetId, DatasetId]]:
        """The edges ``(input, reader)`` from every input of ``start``, recursively, and with
        ``downstream`` to every dataset reading it, recursively. An input not in the graph ends
        its branch (it is reported as missing)."""
        edges: list[tuple[DatasetId, DatasetId]] = []
        pending, seen = [start], {start}
        while pending:
            current = pending.pop()
            for input_id in self.inputs_of(current):
                edges.append((input_id, current))
                if input_id not in seen:
                    seen.add(input_id)
                    if input_id in self.records:
                        pending.append(input_id)
        if downstream:
            known = set(edges)
            pending, done = [start], {start}
            while pending:
                current = pending.pop()
                for reader in self.readers_of(current):
                    edge = (current, reader.id)
                    if edge not in known:
                        known.add(edge)
                        edges.append(edge)
                    if reader.id not in done:
                        done.add(reader.id)
                        pending.append(reader.id)
        return edges


async def load_graph(
    records: Sequence[DatasetRecord],
    index: DatasetInputsTable,
    inputs_at: InputsAt,
    *,
    where: str = "",
) -> DatasetGraph:
    """The graph of ``records`` (the catalog's datasets) from the index; a derivative whose row
    is missing or not at its head is read from its chain (``inputs_at``) and its row rewritten
    (best effort: a catalog that cannot be written now only costs the next load that read)."""
    indexed = await index.load()
    inputs: dict[DatasetId, tuple[DatasetId, ...]] = {}
    for record in records:
        if record.kind is not DatasetKind.DERIVATIVE or record.head is None:
            continue
        row = indexed.get(record.id)
        if row is not None and row[0] == record.head:
            inputs[record.id] = row[1]
            continue
        inputs[record.id] = await inputs_at(record.id, record.head)
        try:
            await index.record(record.id, record.head, inputs[record.id])
        except (OSError, sqlite3.Error, StorageError) as error:
            _log.warning("could not index the inputs of %s: %s", record.alias, error)
    return DatasetGraph(records, inputs, where)
