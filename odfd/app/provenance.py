"""``provenance``: why a derivative's row exists, the input rows it came from down to the
ingests of root datasets, each answer checked by re-running the transform on its witnesses
(``verifier.provenance.trace``).

Called by ``odfd provenance`` and by the daemon for a thin client: the request, the events and
the result have a stable JSON form (the rows as ``docs`` and ``-o json`` show them), and this
module imports the tracer only when it runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from odfd.app.events import Event, EventSink
from odfd.app.forwarding import Request

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.dataset import Dataset


@dataclass(frozen=True, slots=True)
class ProvenanceRequest(Request):
    command: ClassVar[str] = "provenance"
    dataset: str
    offsets: tuple[int, ...] = ()
    """The rows at these offsets; or, with ``where``, the rows the predicate selects."""
    where: str | None = None
    limit: int = 20
    """Rows of those ``where`` selects that are traced."""
    depth: int | None = None
    max_rows: int = 1000


@dataclass(frozen=True, slots=True)
class TracingFirst(Event):
    """More rows match than the request traces: the first ``limit`` are."""

    name: ClassVar[str] = "tracingFirst"
    matched: int
    limit: int


EVENTS: tuple[type[Event], ...] = (TracingFirst,)


@dataclass(frozen=True, slots=True)
class ProvenanceResult:
    dataset: str
    """The alias of the dataset traced."""
    rows: list[dict[str, Any]]
    """Each row's provenance in its JSON form (values that JSON lacks, such as times, as text)."""

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "rows": self.rows}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProvenanceResult:
        return cls(str(data["dataset"]), list(data["rows"]))


async def trace(node: Node, request: ProvenanceRequest, sink: EventSink) -> ProvenanceResult:
    """The provenance of the rows the request selects (none: no row matched ``where``)."""
    from odfd.coordinator.commit import RUN_DIR
    from protocol.identity import DatasetId, DatasetRef
    from verifier.provenance.trace import TraceOptions, Tracer

    workspace = node.workspace
    record = await workspace.resolve(request.dataset)

    async def open_dataset(dataset_id: DatasetId) -> tuple[Dataset, str]:
        found = await workspace.resolve(DatasetRef(dataset_id))
        return workspace.open_dataset(dataset_id), str(found.alias)

    options = TraceOptions(
        depth=request.depth, max_rows=request.max_rows, scratch_dir=workspace.root / RUN_DIR
    )
    tracer = Tracer(open_dataset, node.engines, options)
    offsets = list(request.offsets)
    if request.where is not None:
        offsets = await tracer.select_offsets(record.id, request.where)
        if len(offsets) > request.limit:
            sink.emit(TracingFirst(len(offsets), request.limit))
            offsets = offsets[: request.limit]
    rows = await tracer.explain(record.id, offsets) if offsets else []
    # one JSON form for every caller: values JSON lacks become text here, not in each renderer
    plain = json.loads(json.dumps([row.to_json() for row in rows], default=str))
    return ProvenanceResult(str(record.alias), plain)
