"""What the GraphQL API (``/graphql``) reads of one dataset's chain: a page of its blocks newest
first, its named refs, when its first and last blocks were made, its current schema in a schema
format, its sources, transform and vocabulary, its lineage one step up or down, and its records,
bytes, info, license and readme (``odfd.app.dataset_details``' summary, kept by head)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.app.dataset_details import Summary, SummaryCache

if TYPE_CHECKING:
    from odfd.app.answers import Visible
    from odfd.app.node import Node
    from protocol.identity import DatasetId, Multihash
    from protocol.model import (
        AddPushSource,
        MetadataBlock,
        SetDataSchema,
        SetPollingSource,
        SetTransform,
        SetVocab,
        Timestamp,
    )
    from protocol.query import SchemaFormat
    from storage.catalog import DatasetRecord


@dataclass(frozen=True, slots=True)
class BlockPage:
    blocks: list[tuple[Multihash, MetadataBlock]]
    total: int
    """Blocks in the chain (the head's sequence number + 1)."""


@dataclass(frozen=True, slots=True)
class Timeline:
    created: Timestamp | None
    """System time of the ``Seed``."""
    updated: Timestamp | None
    """System time of the head block."""


async def block_page(node: Node, record: DatasetRecord, page: int, per_page: int) -> BlockPage:
    """Blocks ``page * per_page`` to the next ``per_page``, counted from the head."""
    dataset = node.workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if head is None:
        return BlockPage([], 0)
    state = await dataset.chain.state(head)
    first = page * per_page
    found: list[tuple[Multihash, MetadataBlock]] = []
    if first <= state.sequence_number:
        async for block_hash, block in dataset.chain.iter_blocks(head):
            if block.sequence_number > state.sequence_number - first:
                continue
            found.append((block_hash, block))
            if len(found) == per_page:
                break
    return BlockPage(found, state.sequence_number + 1)


async def block_by_hash(
    node: Node, record: DatasetRecord, block_hash: Multihash
) -> MetadataBlock | None:
    """The block, if it is one of this dataset's (a chain's block store holds only its own)."""
    dataset = node.workspace.open_dataset(record.id)
    from storage.errors import ObjectNotFoundError

    try:
        return await dataset.chain.get_block(block_hash)
    except ObjectNotFoundError:
        return None


async def refs(node: Node, record: DatasetRecord) -> list[tuple[str, Multihash]]:
    """The chain's named refs: ``head`` (the only one a dataset has here)."""
    head = await node.workspace.open_dataset(record.id).chain.head()
    return [] if head is None else [("head", head)]


async def timeline(node: Node, record: DatasetRecord) -> Timeline:
    dataset = node.workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if head is None:
        return Timeline(None, None)
    state = await dataset.chain.state(head)
    seed = None if state.seed_block is None else await dataset.chain.get_block(state.seed_block)
    return Timeline(None if seed is None else seed.system_time, state.system_time)


async def current_schema(
    node: Node, record: DatasetRecord, schema_format: SchemaFormat
) -> str | None:
    """The schema at the head as text in ``schema_format`` (``None`` before any schema)."""
    state = await node.workspace.open_dataset(record.id).chain.state()
    if state.schema is None:
        return None
    return schema_text(state.schema, schema_format)


def schema_text(event: SetDataSchema, schema_format: SchemaFormat) -> str:
    """The schema a ``SetDataSchema`` declares as text in ``schema_format`` (a block's event and
    the head's current schema are rendered alike)."""
    from protocol.query.schema import render_schema
    from verifier.engine.inputs import arrow_schema_of

    rendered = render_schema(arrow_schema_of(event), schema_format)
    return rendered if isinstance(rendered, str) else json.dumps(rendered, separators=(",", ":"))


async def current_watermark(node: Node, record: DatasetRecord) -> Timestamp | None:
    state = await node.workspace.open_dataset(record.id).chain.state()
    watermark: Timestamp | None = state.last_watermark
    return watermark


async def data_summary(node: Node, record: DatasetRecord, cache: SummaryCache) -> Summary:
    """Records and bytes of data slices at the head (kept in ``cache`` until the head moves)."""
    return await cache.get(node.workspace.open_dataset(record.id), record)


@dataclass(frozen=True, slots=True)
class Sources:
    """Where the dataset's data comes from at its head, as the chain's rules keep it."""

    polling: SetPollingSource | None
    push: list[AddPushSource]
    """Push sources not disabled, in the order they were added."""
    transform: SetTransform | None
    vocab: SetVocab | None


async def current_sources(node: Node, record: DatasetRecord) -> Sources:
    state = await node.workspace.open_dataset(record.id).chain.state()
    return Sources(
        state.polling_source, list(state.push_sources.values()), state.transform, state.vocab
    )


async def dependencies(
    node: Node, visible: Visible, record: DatasetRecord, *, downstream: bool
) -> list[DatasetRecord | DatasetId]:
    """The datasets it reads (or that read it), one step; the caller's invisible ones left out
    (``odfd.app.lineage``)."""
    from odfd.app.lineage import direct_dependencies

    return await direct_dependencies(node.workspace, record, downstream=downstream, visible=visible)
