"""Which local derivative datasets read a dataset, and which are behind their inputs: what a
daemon asks to keep them up to date (``odfd.daemon.derivatives`` queues their transforms).

Mirrored derivatives are not local work: their blocks come from their source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odfd.app.pull import input_moved
from protocol.identity import DatasetId
from protocol.model import DatasetKind
from storage.catalog.mirrors import MirrorTable

if TYPE_CHECKING:
    from storage.catalog import DatasetRecord
    from storage.chain.rules import ChainState
    from storage.workspace import Workspace


async def local_derivatives(workspace: Workspace) -> list[DatasetRecord]:
    """Local, non-mirrored derivative datasets. It reads the derivatives and looks each up among
    the mirrors, never every mirror (it runs after every sync that moved a head)."""
    mirrors = MirrorTable(workspace.catalog)
    return [
        record
        for record in await workspace.catalog.list_datasets(DatasetKind.DERIVATIVE)
        if await mirrors.get(record.alias) is None
    ]


async def dependants(workspace: Workspace, dataset_id: DatasetId) -> list[DatasetId]:
    """Local, non-mirrored derivative datasets that read ``dataset_id``: their graph (the
    catalog's index of their inputs; no chain is read)."""
    graph = await workspace.graph(await local_derivatives(workspace))
    return [reader.id for reader in graph.readers_of(dataset_id)]


class InputHeads:
    """The inputs' states at head, each read once for one sweep over the derivatives."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._inputs: dict[DatasetId, tuple[str, ChainState] | None] = {}

    async def moved(self, derivative: DatasetRecord) -> list[str]:
        """The aliases of ``derivative``'s inputs with blocks past what its last
        ``ExecuteTransform`` consumed (or any blocks, if it never ran one); inputs missing from
        the workspace are left out (a transform could not read them). Raises ``OdfError`` when a
        chain cannot be read."""
        state = await self._workspace.open_dataset(derivative.id).chain.state()
        moved = []
        for input_id in state.transform_input_ids:
            if input_id not in self._inputs:
                self._inputs[input_id] = await self._input(input_id)
            found = self._inputs[input_id]
            if found is not None and input_moved(input_id, state, found[1]):
                moved.append(found[0])
        return moved

    async def _input(self, dataset_id: DatasetId) -> tuple[str, ChainState] | None:
        """An input's alias and state at head; None if it is not here or has no head."""
        record = await self._workspace.catalog.get_dataset(dataset_id)
        if record is None:
            return None
        state = await self._workspace.open_dataset(dataset_id).chain.state()
        return None if state.head is None else (record.alias, state)
