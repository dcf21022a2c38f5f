"""A row's provenance for the console's row detail: the same answer as ``odfd provenance``
(why-provenance down to the ingests, where-provenance of copied columns, each checked)."""

from __future__ import annotations

from typing import Any

from protocol.identity import DatasetId, DatasetRef
from storage.dataset import Dataset
from storage.workspace import Workspace
from verifier.engine.registry import Engines
from verifier.provenance.trace import TraceOptions, Tracer

#: Witness rows of one dataset the console traces further at each level (the page lists them).
CONSOLE_MAX_ROWS = 100


async def row_provenance(
    workspace: Workspace, engines: Engines, dataset_id: DatasetId, offset: int, depth: int | None
) -> dict[str, Any]:
    """The JSON answer for the row at ``offset`` (raises the provenance errors, one line each)."""

    async def open_dataset(input_id: DatasetId) -> tuple[Dataset, str]:
        record = await workspace.resolve(DatasetRef(input_id))
        return workspace.open_dataset(input_id), str(record.alias)

    tracer = Tracer(open_dataset, engines, TraceOptions(depth=depth, max_rows=CONSOLE_MAX_ROWS))
    (row,) = await tracer.explain(dataset_id, [offset])
    return {"checkedByReExecution": True, "row": row.to_json()}
