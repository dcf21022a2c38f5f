"""A dataset's lineage: the graph of its inputs (recursively) and, on request, of the datasets
that read it. Built from the workspace's dataset graph (``storage.graph``: the catalog's index of
each derivative's inputs), so it needs no engine and reads no chain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from odfd.errors import OdfdError
from protocol.identity import DatasetId, DatasetRef
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


async def build_lineage(
    workspace: Workspace,
    ref: str,
    *,
    downstream: bool = False,
    visible: Visible | None = None,
    listed: list[DatasetRecord] | None = None,
) -> LineageGraph:
    """Every input of ``ref``, recursively; with ``downstream`` also every dataset reading it,
    recursively (the workspace's dataset graph). Datasets ``visible`` rejects are left out as if
    they did not exist. ``listed`` (the workspace's datasets) lets a caller reuse what it read."""
    graph = await workspace.graph(listed)
    if visible is not None:
        graph = graph.only(visible)
    start = await workspace.try_resolve(DatasetRef.parse(ref))
    if start is None or start.id not in graph.records:
        raise LineageError(f"no dataset {ref} in the workspace at {workspace.root}")
    lineage = LineageGraph(str(start.id))
    lineage.nodes[str(start.id)] = _node(graph.records[start.id])
    for source, target in graph.lineage(start.id, downstream=downstream):
        lineage.edges.append((str(source), str(target)))
        for dataset_id in (source, target):
            key = str(dataset_id)
            if key not in lineage.nodes:
                record = graph.records.get(dataset_id)
                lineage.nodes[key] = (
                    LineageNode(key, key, "Missing", None) if record is None else _node(record)
                )
    return lineage


async def direct_dependencies(
    workspace: Workspace, record: DatasetRecord, *, downstream: bool, visible: Visible
) -> list[DatasetRecord | DatasetId]:
    """One step of lineage: the datasets ``record`` reads, in its transform's order, or with
    ``downstream`` the datasets reading it, by alias. A dataset ``visible`` rejects is left out as
    if it did not exist; an input the workspace does not hold is only its id."""
    graph = await workspace.graph()
    if downstream:
        readers = [reader for reader in graph.readers_of(record.id) if visible(reader)]
        readers.sort(key=lambda reader: reader.alias.lower())
        return list(readers)
    found: list[DatasetRecord | DatasetId] = []
    for input_id in graph.inputs_of(record.id):
        held = graph.records.get(input_id)
        if held is None:
            found.append(input_id)
        elif visible(held):
            found.append(held)
    return found
