"""Datasets on disk: appends under CAS, commits of data and checkpoints, reading and validating."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from protocol.codec.flatbuffers import encode_block, hash_block
from protocol.identity import DatasetId
from protocol.model import (
    AddData,
    Checkpoint,
    DatasetKind,
    DataSlice,
    OffsetInterval,
    Seed,
    SetInfo,
)
from storage.chain import validate_chain
from storage.chain.metadata_chain import iter_blocks_on_disk
from storage.dataset import Dataset
from storage.errors import (
    ChainRuleError,
    CorruptRefError,
    HashMismatchError,
    RefCasError,
    SizeMismatchError,
)
from storage.layout import DatasetLayout, object_name
from storage.stores.localfs import hash_file
from tests.storage.chain_builder import fake_hash, schema


async def new_dataset(root: Path, kind: DatasetKind = DatasetKind.ROOT) -> Dataset:
    _, dataset_id = DatasetId.new_generated()
    dataset = Dataset.open_local(root, dataset_id)
    dataset.layout.create()
    await dataset.commit_event(Seed(dataset_id=dataset_id, dataset_kind=kind), expected_head=None)
    return dataset


async def test_blocks_are_stored_under_their_hash_and_head_points_to_the_last(
    tmp_path: Path,
) -> None:
    dataset = await new_dataset(tmp_path / "ds")
    result = await dataset.commit_event(
        SetInfo(description="hi"), expected_head=await dataset.chain.head()
    )
    block_file = tmp_path / "ds" / "blocks" / object_name(result.new_head)
    assert block_file.read_bytes() == encode_block(result.block)
    assert (tmp_path / "ds" / "refs" / "head").read_text() == str(result.new_head)
    assert result.block.sequence_number == 1 and result.block.prev_block_hash == result.old_head
    reopened = Dataset.open_local(tmp_path / "ds")
    blocks = [b async for _, b in reopened.chain.iter_blocks()]
    assert [type(b.event) for b in blocks] == [SetInfo, Seed]
    assert (await validate_chain(reopened.chain)).sequence_number == 1


async def test_stale_expected_head_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path)
    seed = await dataset.chain.head()
    first = await dataset.commit_event(SetInfo(description="a"), expected_head=seed)
    with pytest.raises(RefCasError):
        await dataset.commit_event(SetInfo(description="b"), expected_head=seed)
    assert await dataset.chain.head() == first.new_head
    assert (await validate_chain(dataset.chain)).sequence_number == 1


async def test_concurrent_writers_on_one_head_produce_one_linear_chain(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path)
    writers = [Dataset.open_local(tmp_path, dataset.id) for _ in range(8)]

    async def write(n: int, w: Dataset) -> bool:
        try:
            await w.commit_event(
                SetInfo(description=f"w{n}"), expected_head=await dataset.chain.head()
            )
            return True
        except RefCasError:
            return False

    head = await dataset.chain.head()
    outcomes = await asyncio.gather(
        *(
            w.commit_event(SetInfo(description=f"w{n}"), expected_head=head)
            for n, w in enumerate(writers)
        ),
        return_exceptions=True,
    )
    assert sum(1 for o in outcomes if not isinstance(o, BaseException)) == 1
    assert all(isinstance(o, RefCasError) for o in outcomes if isinstance(o, BaseException))
    assert (await validate_chain(dataset.chain)).sequence_number == 1
    assert await write(99, writers[0])


async def test_commit_data_moves_files_in_and_checks_them(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path / "ds")
    head = (
        await dataset.commit_event(schema("a"), expected_head=await dataset.chain.head())
    ).new_head
    data_file = tmp_path / "slice.parquet"
    data_file.write_bytes(os.urandom(1000))
    checkpoint_file = tmp_path / "cp.bin"
    checkpoint_file.write_bytes(b"state")
    data_hash, data_size = hash_file(data_file)
    cp_hash, cp_size = hash_file(checkpoint_file)
    event = AddData(
        new_data=DataSlice(
            logical_hash=fake_hash("l"),
            physical_hash=data_hash,
            offset_interval=OffsetInterval(start=0, end=9),
            size=data_size,
        ),
        new_checkpoint=Checkpoint(physical_hash=cp_hash, size=cp_size),
    )
    wrong_size = AddData(
        new_data=DataSlice(
            logical_hash=fake_hash("l"),
            physical_hash=data_hash,
            offset_interval=OffsetInterval(start=0, end=9),
            size=999,
        )
    )
    with pytest.raises(SizeMismatchError):
        await dataset.commit_data(wrong_size, data_file=data_file, expected_head=head)
    wrong_hash = AddData(
        new_data=DataSlice(
            logical_hash=fake_hash("l"),
            physical_hash=fake_hash("x"),
            offset_interval=OffsetInterval(start=0, end=9),
            size=data_size,
        )
    )
    with pytest.raises(HashMismatchError):
        await dataset.commit_data(wrong_hash, data_file=data_file, expected_head=head)
    assert data_file.exists() and await dataset.chain.head() == head

    result = await dataset.commit_data(
        event, data_file=data_file, checkpoint_file=checkpoint_file, expected_head=head
    )
    assert not data_file.exists() and not checkpoint_file.exists()
    assert (tmp_path / "ds" / "data" / object_name(data_hash)).stat().st_size == 1000
    assert (tmp_path / "ds" / "checkpoints" / object_name(cp_hash)).read_bytes() == b"state"
    state = await validate_chain(dataset.chain, data=dataset.data, checkpoints=dataset.checkpoints)
    assert (
        state.head == result.new_head
        and state.last_offset == 9
        and state.last_checkpoint == cp_hash
    )


async def test_block_naming_a_missing_object_is_refused(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path)
    head = (
        await dataset.commit_event(schema("a"), expected_head=await dataset.chain.head())
    ).new_head
    event = AddData(
        new_data=DataSlice(
            logical_hash=fake_hash("l"),
            physical_hash=fake_hash("p"),
            offset_interval=OffsetInterval(start=0, end=0),
            size=1,
        )
    )
    with pytest.raises(ChainRuleError, match=r"\[missing-object\].*newData") as caught:
        await dataset.commit_event(event, expected_head=head)
    assert caught.value.sequence_number == 2
    assert await dataset.chain.head() == head
    assert sorted(os.listdir(tmp_path / "blocks")) == sorted(
        [object_name(h) async for h in dataset.blocks.iter_hashes()]
    )
    assert len(os.listdir(tmp_path / "blocks")) == 2


async def seed_and_infos(root: Path, infos: int) -> Dataset:
    """A dataset at ``root``: its ``Seed`` and ``infos`` ``SetInfo`` blocks."""
    dataset = await new_dataset(root)
    head = await dataset.chain.head()
    for n in range(infos):
        head = (
            await dataset.commit_event(SetInfo(description=str(n)), expected_head=head)
        ).new_head
    return dataset


async def test_corrupt_and_missing_blocks_are_reported(tmp_path: Path) -> None:
    dataset = await seed_and_infos(tmp_path, 3)
    blocks = [h async for h, _ in dataset.chain.iter_blocks()]
    victim = tmp_path / "blocks" / object_name(blocks[2])
    original = victim.read_bytes()
    victim.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.raises(HashMismatchError, match=str(blocks[2])):
        await validate_chain(Dataset.open_local(tmp_path).chain)
    victim.unlink()
    with pytest.raises(ChainRuleError, match=r"\[missing-block\]") as caught:
        await validate_chain(Dataset.open_local(tmp_path).chain)
    assert caught.value.block_hash == blocks[1]


async def test_the_walk_on_disk_reads_what_the_chain_reads_with_the_same_checks(
    tmp_path: Path,
) -> None:
    dataset = await seed_and_infos(tmp_path, 3)
    layout = DatasetLayout(tmp_path)
    walked = list(iter_blocks_on_disk(layout))
    assert walked == [item async for item in dataset.chain.iter_blocks()]
    assert [block.sequence_number for _, block in walked] == [3, 2, 1, 0]
    victim = layout.blocks_dir / object_name(walked[2][0])
    original = victim.read_bytes()
    victim.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.raises(HashMismatchError, match=str(walked[2][0])):
        list(iter_blocks_on_disk(layout))
    victim.unlink()
    with pytest.raises(ChainRuleError, match=r"\[missing-block\]") as caught:
        list(iter_blocks_on_disk(layout))
    assert caught.value.block_hash == walked[1][0]
    (layout.refs_dir / "head").write_text("not a hash")
    with pytest.raises(CorruptRefError, match="does not hold a multihash"):
        list(iter_blocks_on_disk(layout))


async def test_forward_iteration_spans_segments_in_order(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path)
    head = await dataset.chain.head()
    for n in range(40):
        head = (
            await dataset.commit_event(SetInfo(description=str(n)), expected_head=head)
        ).new_head
    for segment in (1, 3, 7, 41, 100):
        seqs = [
            b.sequence_number async for _, b in dataset.chain.iter_blocks_forward(segment=segment)
        ]
        assert seqs == list(range(41)), segment


async def test_state_follows_appends_made_by_another_writer(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path)
    assert (await dataset.chain.state()).sequence_number == 0
    other = Dataset.open_local(tmp_path, dataset.id)
    head = await other.chain.head()
    for n in range(5):
        head = (await other.commit_event(SetInfo(description=str(n)), expected_head=head)).new_head
    state = await dataset.chain.state()
    assert state.sequence_number == 5 and state.head == head
    result = await dataset.commit_event(SetInfo(description="mine"), expected_head=head)
    assert result.block.sequence_number == 6


async def test_remote_aliases_use_the_reference_config_format(tmp_path: Path) -> None:
    dataset = await new_dataset(tmp_path)
    await dataset.set_remote_aliases("pull", ["https://example.org/ds", "https://example.org/ds"])
    await dataset.set_remote_aliases("push", ["odf+https://node/ds"])
    text = (tmp_path / "info" / "config").read_text()
    assert text.startswith("kind: DatasetConfig\nversion: 1\ncontent:\n")
    assert await dataset.remote_aliases() == {
        "pull": ["https://example.org/ds"],
        "push": ["odf+https://node/ds"],
    }


async def test_append_stored_with_decoded_blocks_still_rehashes_each_stored_file(
    tmp_path: Path,
) -> None:
    """Replication hands over the blocks it decoded; a stored file with other bytes under the
    block's name still stops the head."""
    dataset = await new_dataset(tmp_path)
    seed = await dataset.chain.head()
    assert seed is not None
    seed_block = await dataset.chain.get_block(seed)
    block = dataclasses.replace(
        seed_block, prev_block_hash=seed, sequence_number=1, event=SetInfo(description="x")
    )
    hash, data = hash_block(block)
    block_file = tmp_path / "blocks" / object_name(hash)
    block_file.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(HashMismatchError):
        await dataset.chain.append_stored([hash], [block])
    assert await dataset.chain.head() == seed
    with pytest.raises(HashMismatchError):
        await dataset.chain.check_stored([hash])  # the same re-read, run beside other work
    assert await dataset.chain.head() == seed
    block_file.write_bytes(data)
    await dataset.chain.check_stored([hash])
    assert await dataset.chain.append_stored([hash], [block], stored_checked=True) == hash
    assert await dataset.chain.head() == hash
