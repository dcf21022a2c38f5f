"""A dataset's lineage: the graph of its inputs (recursively) and, on request, of the datasets
that read it. Built from each chain's ``SetTransform`` (through the saved chain state), so it
needs no engine and works on any workspace."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from odfd.errors import OdfdError
from protocol.identity import DatasetId, DatasetRef, Multihash
from protocol.model import DatasetKind
from storage.catalog import DatasetRecord
from storage.workspace import Workspace


class LineageError(OdfdError):
    """The dataset asked about is not in the workspace."""


@dataclass(frozen=True, slots=True)
class LineageNode:
    id: str
    alias: str
    kind: str
    """``Root``, ``Derivative``, or ``Missing`` for an input the workspace does not hold."""
    head: str | None


@dataclass(slots=True)
class LineageGraph:
    root: str
    """The id of the dataset asked about."""
    nodes: dict[str, LineageNode] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    """``(input id, derivative id)``: data flows from the first to the second."""

    def inputs_of(self, node_id: str) -> list[str]:
        return [source for source, target in self.edges if target == node_id]

    def outputs_of(self, node_id: str) -> list[str]:
        return [target for source, target in self.edges if source == node_id]

    def to_json(self) -> dict[str, object]:
        return {
            "root": self.root,
            "nodes": [
                {"id": n.id, "alias": n.alias, "kind": n.kind, "head": n.head}
                for n in sorted(self.nodes.values(), key=lambda n: n.alias.lower())
            ],
            "edges": [{"from": source, "to": target} for source, target in self.edges],
        }


Visible = Callable[[DatasetRecord], bool]


def _node(record: DatasetRecord) -> LineageNode:
    head = None if record.head is None else record.head.to_multibase()
    return LineageNode(str(record.id), record.alias, record.kind.value, head)


class InputIndex:
    """Each derivative's inputs by (dataset, head): a chain is read again only after its head
    moved (the console keeps one for the life of the server)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._entries: dict[DatasetId, tuple[Multihash | None, tuple[DatasetId, ...]]] = {}

    async def inputs(self, record: DatasetRecord) -> tuple[DatasetId, ...]:
        if record.kind is not DatasetKind.DERIVATIVE or record.head is None:
            return ()
        cached = self._entries.get(record.id)
        if cached is not None and cached[0] == record.head:
            return cached[1]
        state = await self.workspace.open_dataset(record.id).chain.state(record.head)
        self._entries[record.id] = (record.head, state.transform_input_ids)
        return state.transform_input_ids


async def build_lineage(
    workspace: Workspace,
    ref: str,
    *,
    downstream: bool = False,
    visible: Visible | None = None,
    listed: list[DatasetRecord] | None = None,
    index: InputIndex | None = None,
) -> LineageGraph:
    """Every input of ``ref``, recursively; with ``downstream`` also every dataset reading it,
    recursively. Datasets ``visible`` rejects are left out as if they did not exist. ``listed``
    (the workspace's datasets) and ``index`` let a caller reuse what it already read."""
    show = visible or (lambda record: True)
    everything = listed if listed is not None else await workspace.list_datasets()
    records = {record.id: record for record in everything if show(record)}
    start = await workspace.try_resolve(DatasetRef.parse(ref))
    if start is None or start.id not in records:
        raise LineageError(f"no dataset {ref} in the workspace at {workspace.root}")
    start = records[start.id]
    graph = LineageGraph(str(start.id))
    graph.nodes[str(start.id)] = _node(start)
    inputs_index = index or InputIndex(workspace)

    async def inputs(dataset_id: DatasetId) -> tuple[DatasetId, ...]:
        return await inputs_index.inputs(records[dataset_id])

    pending = [start.id]
    seen = {start.id}
    while pending:
        current = pending.pop()
        for input_id in await inputs(current):
            key = str(input_id)
            graph.edges.append((key, str(current)))
            if input_id in seen:
                continue
            seen.add(input_id)
            record = records.get(input_id)
            if record is None:
                graph.nodes[key] = LineageNode(key, key, "Missing", None)
                continue
            graph.nodes[key] = _node(record)
            pending.append(input_id)
    if downstream:
        readers: dict[DatasetId, list[DatasetId]] = {}
        for dataset_id in records:
            for input_id in await inputs(dataset_id):
                readers.setdefault(input_id, []).append(dataset_id)
        pending, done = [start.id], {start.id}
        while pending:
            current = pending.pop()
            for reader in readers.get(current, []):
                edge = (str(current), str(reader))
                if edge not in graph.edges:
                    graph.edges.append(edge)
                graph.nodes.setdefault(str(reader), _node(records[reader]))
                if reader not in done:
                    done.add(reader)
                    pending.append(reader)
    return graph
