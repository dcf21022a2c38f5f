"""Reading datasets for people: the slices of a dataset as the node knew it at some point.

``AS OF`` pins a query to a moment: a block hash pins the dataset holding that block to exactly
that block (and every other dataset to the block's system time); a time pins each dataset to its
last block written at or before it. Without it, queries see every dataset at its head.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from odfd.errors import OdfdError
from protocol.errors import ParseError
from protocol.identity import Multihash
from protocol.model import Timestamp
from storage.dataset import Dataset
from storage.workspace import Workspace
from verifier.engine.columns import Vocab
from verifier.engine.inputs import all_slices, arrow_schema_of, slice_paths


class AsOfError(OdfdError):
    """An ``AS OF`` point names no block of the workspace, or precedes a dataset's history."""


@dataclass(frozen=True, slots=True)
class AsOf:
    block: Multihash | None = None
    time: Timestamp | None = None

    @classmethod
    def parse(cls, text: str) -> AsOf:
        """A block hash (any multibase) or an RFC 3339 time."""
        try:
            return cls(time=Timestamp.parse_rfc3339(text))
        except ParseError:
            pass
        try:
            return cls(block=Multihash.from_multibase(text))
        except ParseError:
            raise AsOfError(
                f"AS OF {text!r} is neither a block hash nor an RFC 3339 time"
            ) from None


@dataclass(frozen=True, slots=True)
class DatasetView:
    """What a query sees of one dataset."""

    alias: str
    head: Multihash | None
    paths: tuple[Path, ...]
    schema: pa.Schema | None
    vocab: Vocab


async def resolve_as_of(workspace: Workspace, as_of: AsOf) -> tuple[Multihash | None, Timestamp]:
    """For a block hash: the block and its system time (the block must be in the workspace)."""
    if as_of.block is None:
        if as_of.time is None:
            raise AsOfError("AS OF needs a block hash or a time")
        return None, as_of.time
    for record in await workspace.list_datasets():
        dataset = workspace.open_dataset(record.id)
        if await dataset.blocks.contains(as_of.block):
            block = await dataset.chain.get_block(as_of.block)
            return as_of.block, block.system_time
    raise AsOfError(f"AS OF block {as_of.block} is not in any dataset of the workspace")


async def dataset_view(
    dataset: Dataset, *, pinned_block: Multihash | None = None, pinned_time: Timestamp | None = None
) -> DatasetView:
    """The dataset at its head, at ``pinned_block`` if it holds it, else as of ``pinned_time``."""
    alias = await dataset.alias() or str(dataset.id)
    head = await dataset.chain.head()
    if pinned_block is not None and await dataset.blocks.contains(pinned_block):
        head = pinned_block
    elif pinned_time is not None:
        head = await _head_at(dataset, pinned_time)
    if head is None:
        return DatasetView(alias, None, (), None, Vocab())
    state = await dataset.chain.state(head)
    schema = arrow_schema_of(state.schema) if state.schema is not None else None
    paths = await slice_paths(dataset, await all_slices(dataset, head))
    return DatasetView(alias, head, paths, schema, Vocab.of(state.vocab))


async def _head_at(dataset: Dataset, time: Timestamp) -> Multihash | None:
    async for hash, block in dataset.chain.iter_blocks():
        if block.system_time <= time:
            return hash
    return None
