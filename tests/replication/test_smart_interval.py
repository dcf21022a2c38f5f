"""The serving node's side of a smart pull: the blocks it sends, read from its own chain."""

from __future__ import annotations

import pytest

from odfd.server.smart_pull import read_interval
from protocol.codec.flatbuffers import is_block_hash
from storage.errors import StorageError
from storage.workspace import Workspace
from tests.replication.datagen import create_root


async def test_the_interval_is_checked_blocks_oldest_first(node_a: Workspace) -> None:
    writer = await create_root(node_a, "root", slices=2, empty_blocks=1)
    chain = writer.dataset.chain
    head = await chain.head()
    assert head is not None
    interval = await read_interval(chain, head, None, False)
    assert interval.blocks[-1][0] == head
    assert [block.sequence_number for _, _, block in interval.blocks] == list(
        range(len(interval.blocks))
    )
    assert all(is_block_hash(hash, data) for hash, data, _ in interval.blocks)
    assert interval.plan().num_blocks == len(interval.blocks)
    files = [p for p in node_a.root.rglob("blocks/*") if p.name.endswith(head.to_multibase())]
    assert len(files) == 1
    files[0].write_bytes(files[0].read_bytes() + b"x")
    with pytest.raises(StorageError, match="corrupt"):
        await read_interval(chain, head, None, False)
