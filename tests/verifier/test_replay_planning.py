"""Replay planning (no Spark): the requests layer 3 rebuilds in one forward pass, handing each
transaction the state before it, equal those rebuilt one by one from freshly opened datasets
(each computing its states from the chain), for every transaction of a derivative whose
transform, vocabularies and input schema change along the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.identity import DatasetId, DatasetRef, Multihash
from protocol.model import (
    AddData,
    DatasetKind,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataEvent,
    SetTransform,
    SetVocab,
    SqlQueryStep,
    Timestamp,
    TransformInput,
    TransformSql,
)
from storage.chain.rules import ChainState
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.verifier.builders import T0, schema_event, slice_table, write_slice
from verifier.engine.contract import TransformRequest
from verifier.engine.replay import ReplayError, replay_request

SLICES = 12


async def add_slice(workspace: Workspace, dataset: Dataset, n: int, *, extra_column: bool) -> None:
    state = await dataset.chain.state()
    offset = 0 if state.last_offset is None else state.last_offset + 1
    time = Timestamp(T0.epoch_nanos + (n + 1) * 60_000_000_000)
    table = slice_table(offset, [n, n + 1], system_time=time)
    if extra_column:
        table = table.append_column("note", table.column("value").cast("string"))
    path = workspace.root / "staging" / f"{n}.parquet"
    data_slice = write_slice(table, path)
    schema = schema_event(table)
    if state.schema != schema:
        await dataset.commit_event(schema, expected_head=state.head, system_time=time)
        state = await dataset.chain.state()
    event = AddData(
        prev_offset=state.last_offset,
        new_data=data_slice,
        new_watermark=Timestamp(T0.epoch_nanos + n * 1_000_000_000),
    )
    await dataset.commit_data(event, data_file=path, expected_head=state.head, system_time=time)


def transform(source: DatasetId, query: str) -> SetTransform:
    return SetTransform(
        inputs=(TransformInput(dataset_ref=DatasetRef(source), alias="src"),),
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=query),)),
    )


async def build(workspace: Workspace) -> Dataset:
    """A root whose schema gains a column and whose vocabulary changes half-way, and a
    derivative with one transaction per root slice, whose transform and vocabulary change."""
    source = await workspace.create_dataset("src", DatasetKind.ROOT, system_time=T0)
    assert source.id is not None
    derived = await workspace.create_dataset(
        "derived",
        DatasetKind.DERIVATIVE,
        [transform(source.id, "SELECT * FROM src")],
        system_time=T0,
    )
    prev_block: Multihash | None = None
    prev_offset: int | None = None
    for n in range(SLICES):
        await add_slice(workspace, source, n, extra_column=n >= SLICES // 2)
        if n == SLICES // 3:
            await source.commit_event(
                SetVocab(event_time_column="value"),
                expected_head=await source.chain.head(),
                system_time=Timestamp(T0.epoch_nanos + (n + 1) * 60_000_000_000),
            )
        source_state = await source.chain.state()
        state = await derived.chain.state()
        time = Timestamp(T0.epoch_nanos + (n + 2) * 60_000_000_000)
        events: list[MetadataEvent] = []
        if n == SLICES // 4:
            events.append(SetVocab(offset_column="o"))
        if n == SLICES // 2:
            events.append(transform(source.id, "SELECT event_time, value FROM src"))
        events.append(
            ExecuteTransform(
                query_inputs=(
                    ExecuteTransformInput(
                        dataset_id=source.id,
                        prev_block_hash=prev_block,
                        new_block_hash=source_state.head,
                        prev_offset=prev_offset,
                        new_offset=source_state.last_offset,
                    ),
                ),
                new_watermark=source_state.last_watermark,
            )
        )
        await derived.commit_events(events, expected_head=state.head, system_time=time)
        prev_block, prev_offset = source_state.head, source_state.last_offset
    return derived


async def test_requests_from_one_forward_pass_equal_those_from_fresh_datasets(
    tmp_path: Path,
) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await build(workspace)

    async with await Workspace.open(tmp_path / "ws") as workspace:
        derived = await workspace.get_dataset("derived")
        opened: dict[DatasetId, Dataset] = {}

        async def open_input(dataset_id: DatasetId) -> Dataset:
            return opened.setdefault(dataset_id, workspace.open_dataset(dataset_id))

        planned: list[TransformRequest] = []
        hashes: list[Multihash] = []
        state = ChainState(derived.id)
        async for hash, block in derived.chain.iter_blocks_forward():
            if isinstance(block.event, ExecuteTransform):
                planned.append(
                    await replay_request(derived, hash, open_input, tmp_path, before=state.copy())
                )
                hashes.append(hash)
            state.apply(hash, block)

    assert len(planned) == SLICES
    for hash, request in zip(hashes, planned, strict=True):
        async with await Workspace.open(tmp_path / "ws") as workspace:

            async def fresh_input(dataset_id: DatasetId) -> Dataset:
                return workspace.open_dataset(dataset_id)

            fresh = await workspace.get_dataset("derived")
            assert await replay_request(fresh, hash, fresh_input, tmp_path) == request
    # The plans do see the changes along the chains (so older states really were used).
    assert len({r.inputs[0].schema for r in planned}) == 2
    assert len({r.inputs[0].vocab for r in planned}) == 2
    assert len({r.vocab for r in planned}) == 2
    assert len({r.transform for r in planned}) == 2


async def test_a_state_for_another_block_is_refused(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        derived = await build(workspace)
        head = await derived.chain.head()
        assert head is not None
        wrong = await derived.chain.state()  # at the transaction itself, not before it

        async def open_input(dataset_id: DatasetId) -> Dataset:
            return workspace.open_dataset(dataset_id)

        with pytest.raises(ReplayError, match="not at the previous block"):
            await replay_request(derived, head, open_input, tmp_path, before=wrong)
