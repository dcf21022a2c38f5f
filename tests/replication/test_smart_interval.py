"""The serving node's side of a smart pull: the blocks it sends, read from its own chain."""

from __future__ import annotations

import pytest

from odfd.server.smart_pull import read_interval
from protocol.codec.flatbuffers import decode_block, encode_block, is_block_hash
from protocol.model import AddData, MetadataBlock
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
    assert [decode_block(data).sequence_number for _, data in interval.blocks] == list(
        range(len(interval.blocks))
    )
    assert all(is_block_hash(hash, data) for hash, data in interval.blocks)
    assert interval.plan.num_blocks == len(interval.blocks)
    events = [decode_block(data).event for _, data in interval.blocks]
    added = [
        file
        for event in events
        if isinstance(event, AddData)
        for file in (event.new_data, event.new_checkpoint)
        if file is not None
    ]
    assert interval.plan.num_objects == len(added) >= 2
    assert interval.plan.bytes_in_raw_objects == sum(file.size for file in added)
    assert interval.plan.num_records == 2 * 10  # two slices of ten rows
    assert interval.plan.bytes_in_raw_blocks == sum(len(data) for _, data in interval.blocks)
    files = [p for p in node_a.root.rglob("blocks/*") if p.name.endswith(head.to_multibase())]
    assert len(files) == 1
    files[0].write_bytes(files[0].read_bytes() + b"x")
    with pytest.raises(StorageError, match="corrupt"):
        await read_interval(chain, head, None, False)


async def test_a_block_numbered_out_of_line_is_refused(node_a: Workspace) -> None:
    writer = await create_root(node_a, "root", slices=1)
    chain = writer.dataset.chain
    head = await chain.head()
    assert head is not None
    block = decode_block(await chain.get_block_bytes(head))
    skipping = MetadataBlock(
        system_time=block.system_time,
        prev_block_hash=head,
        sequence_number=block.sequence_number + 2,
        event=block.event,
    )
    stored = await chain.blocks.put_bytes(encode_block(skipping))
    with pytest.raises(StorageError, match=f"block {head} has sequence number"):
        await read_interval(chain, stored, None, False)
