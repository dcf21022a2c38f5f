"""What the first pages of a node's datasets need, read ahead (the web console's warm-up after a
start): the first datasets' summaries and the dataset graph, whose index of each derivative's
inputs is completed here, so that the first visitor does not wait for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import OdfError

if TYPE_CHECKING:
    from odfd.app.dataset_details import SummaryCache
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


@dataclass(frozen=True, slots=True)
class Skipped:
    """What could not be read ahead, and why: its page will say what is wrong with it."""

    alias: str | None
    """The dataset whose summary failed; ``None``: the dataset graph."""
    error: OdfError


async def read_ahead(
    workspace: Workspace, records: list[DatasetRecord], first: int, summaries: SummaryCache
) -> list[Skipped]:
    """Summaries of the ``first`` of ``records`` (the catalog's datasets) into ``summaries``,
    then the dataset graph; what failed is returned, the rest is read."""
    skipped = []
    for record in records[:first]:
        try:
            await summaries.get(workspace.open_dataset(record.id), record)
        except OdfError as err:
            skipped.append(Skipped(record.alias, err))
    try:
        await workspace.graph(records)  # indexes the inputs of any derivative not indexed yet
    except OdfError as err:
        skipped.append(Skipped(None, err))
    return skipped
