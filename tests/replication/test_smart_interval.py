"""The serving node's side of a smart pull: the blocks it sends, read from its own chain."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from odfd.app.pull_intervals import Interval, read_interval
from odfd.server import smart_pull
from odfd.server.pull_answers import PullAnswer, PullAnswers
from odfd.server.state import STATE_KEY
from odfd.sync.pull import PullOptions, pull
from odfd.sync.transport import smart_client as smart
from protocol.codec.flatbuffers import decode_block, encode_block, is_block_hash
from protocol.identity import Multihash
from protocol.model import AddData, MetadataBlock
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import pack_blocks
from storage.chain import MetadataChain
from storage.errors import StorageError
from storage.stores.localfs import LocalFsObjectStore
from storage.workspace import Workspace
from tests.fixtures.seaweedfs import SeaweedServer
from tests.replication.conftest import ServeFactory
from tests.replication.datagen import create_root
from tests.replication.test_s3_node import s3_backed_node


async def test_the_interval_is_checked_blocks_oldest_first(node_a: Workspace) -> None:
    writer = await create_root(node_a, "root", slices=2, empty_blocks=1)
    chain = writer.dataset.chain
    head = await chain.head()
    assert head is not None
    interval = await read_interval(chain, head, None, False)
    _assert_whole_chain(interval, head)
    assert all(is_block_hash(hash, data) for hash, data in interval.blocks)
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


async def test_a_peer_pulling_an_interval_pulled_before_gets_the_kept_answer(
    node_a: Workspace,
    node_b: Workspace,
    serve: ServeFactory,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The plan and the metadata answer of an interval are kept: the next pull of the same head
    gets the same blocks without the server reading its chain again; a new head is read."""
    writer = await create_root(node_a, "root", slices=2)
    server = await serve(node_a)
    reads: list[Multihash] = []

    async def reading(
        chain: MetadataChain, head: Multihash, begin_after: Multihash | None, force: bool
    ) -> Interval:
        reads.append(head)
        return await read_interval(chain, head, begin_after, force)

    monkeypatch.setattr(smart_pull, "read_interval", reading)
    head = await writer.dataset.chain.head()
    assert head is not None
    first = await pull(
        node_b, server.url + "root", alias="one", options=PullOptions(protocol="smart")
    )
    kept = server.runner.app[STATE_KEY].pull_answers.get(
        (str(writer.dataset_id), head, None, False)
    )
    assert kept is not None and reads == [head]
    interval = await read_interval(writer.dataset.chain, head, None, False)
    assert kept.plan == interval.plan
    assert kept.metadata == m.encode(
        m.DatasetMetadataPullResponse(m.MetadataBlocksBatch(*pack_blocks(interval.blocks)))
    )
    async with await Workspace.init(tmp_path / "c") as node_c:
        second = await pull(node_c, server.url + "root", options=PullOptions(protocol="smart"))
    assert reads == [head]
    assert second.new_head == first.new_head == head and second.num_blocks == first.num_blocks
    new_head = await writer.append(slices=1)
    third = await pull(
        node_b, server.url + "root", alias="one", options=PullOptions(protocol="smart")
    )
    assert reads == [head, new_head] and third.new_head == new_head and third.num_blocks > 0


def test_kept_answers_are_bounded() -> None:
    plan = m.TransferPlan(1, 0, 0, 1, 0)
    answers = PullAnswers(entries=2, max_chars=10)
    keys = [("d", Multihash.from_digest_sha3_256(bytes([i])), None, False) for i in range(3)]
    answers.put(keys[0], PullAnswer(plan, "x" * 11))
    assert answers.get(keys[0]) is None  # over the size bound
    for key in keys:
        answers.put(key, PullAnswer(plan, "x"))
    assert answers.get(keys[0]) is None  # forgotten first
    assert answers.get(keys[1]) is not None and answers.get(keys[2]) is not None


async def test_a_kept_answer_is_given_only_for_its_own_dataset(
    node_a: Workspace, serve: ServeFactory
) -> None:
    """A client may name any head (``stop_at``): one of another dataset, whose answer the
    server keeps, is still looked for in the requested dataset's chain, and not found there."""
    await create_root(node_a, "x", slices=1)
    other = await create_root(node_a, "y", slices=1)
    other_head = await other.dataset.chain.head()
    server = await serve(node_a)
    async with aiohttp.ClientSession() as session:
        async with smart.connect(session, server.url + "y/", "pull", None) as channel:
            await smart.pull_plan(channel, None, False)
            batch = await smart.pull_metadata(channel)
        assert batch.num_blocks > 0
        async with smart.connect(session, server.url + "x/", "pull", None) as channel:
            with pytest.raises(smart.RemoteTransferError):
                await smart.pull_plan(channel, None, False, stop_at=other_head)


async def test_an_interval_of_blocks_in_a_bucket_is_read_through_the_event_loop(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A node keeping its datasets in S3: the walk's worker thread reads each block through
    the bucket's client on the event loop, with the same checks and the same answer."""
    url = s3_server.url(s3_bucket, "node")
    async with await s3_backed_node(tmp_path / "s3node", s3_server, url) as node:
        writer = await create_root(node, "root", slices=2, empty_blocks=2)
        chain = writer.dataset.chain
        assert not isinstance(chain.blocks, LocalFsObjectStore)
        head = await chain.head()
        assert head is not None
        interval = await read_interval(chain, head, None, False)
        _assert_whole_chain(interval, head)
        assert interval.plan.num_records == 2 * 10
        second = interval.blocks[1][0]
        later = await read_interval(chain, head, second, False)
        assert later.blocks == interval.blocks[2:]


def _assert_whole_chain(interval: Interval, head: Multihash) -> None:
    """The interval from the seed: oldest first, ending at ``head``, every block planned."""
    assert interval.blocks[-1][0] == head
    assert [decode_block(data).sequence_number for _, data in interval.blocks] == list(
        range(len(interval.blocks))
    )
    assert interval.plan.num_blocks == len(interval.blocks)
