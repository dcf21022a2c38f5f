"""``odfd log``: a dataset's blocks newest first, which write brought each, and the audit trail of
its writes.

A workspace whose datasets are folders on this machine is read without an event loop
(:func:`blocks_in_folder`: the catalog through a plain sqlite3 reader, the chain through the
verified on-disk reader), so the command starts in half the time; this module imports nothing
of asyncio, aiosqlite or the codecs at its top (``tests/cli/test_lazy_imports.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

from storage.chain.metadata_chain import iter_blocks_on_disk
from storage.errors import DatasetNotFoundError

if TYPE_CHECKING:
    from odfd.app.node import Node, NodeView
    from odfd.app.write_log import BlockWriters
    from protocol.identity import Multihash
    from protocol.model import MetadataBlock
    from storage.catalog.sync_reader import SyncCatalogReader
    from storage.catalog.write_log import WriteRecord


def blocks_in_folder(
    catalog: SyncCatalogReader, node: NodeView, dataset: str
) -> Iterator[tuple[Multihash, MetadataBlock]] | None:
    """``dataset``'s blocks, newest first, read from its folder as they are walked; None when the
    workspace keeps its datasets elsewhere (a bucket: :func:`blocks` reads them)."""
    if node.config.storage.url:
        return None
    record = catalog.find_dataset(dataset)
    if record is None:
        raise DatasetNotFoundError(f"dataset {dataset} is not in the workspace {node.layout.root}")
    return iter_blocks_on_disk(node.layout.dataset(record.id))


async def blocks(
    node: Node, dataset: str, *, with_writers: bool = False
) -> tuple[AsyncIterator[tuple[Multihash, MetadataBlock]], BlockWriters | None]:
    """``dataset``'s blocks, newest first, read through the node's storage as they are walked;
    with ``with_writers``, which write brought each (``odfd log --who``)."""
    workspace = node.workspace
    record = await workspace.resolve(dataset)
    chain = workspace.open_dataset(record.id).chain
    writers = None
    if with_writers:
        from odfd.app.write_log import BlockWriters, writes_of

        writers = BlockWriters(await writes_of(workspace, record.id))
    return chain.iter_blocks(), writers


async def writes(node: Node, dataset: str) -> list[WriteRecord]:
    """The audit trail of one dataset (by id, or by alias when it is gone), oldest first."""
    from odfd.app.write_log import writes_of, writes_to

    record = await node.workspace.try_resolve(dataset)
    if record is not None:
        return await writes_of(node.workspace, record.id)
    found = await writes_to(node.workspace, dataset)
    if not found:
        raise DatasetNotFoundError(f"dataset {dataset} is not in the workspace")
    return found
