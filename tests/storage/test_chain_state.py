"""Chain states without a pass over the chain per call: saved states, kept states at older
blocks, and the bound on walking a chain backward.

Every state obtained a cheap way is compared, slot by slot, with the fold of the rules over the
chain from its ``Seed`` (``ChainState.apply`` block by block), computed independently here.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.codec.flatbuffers import encode_block, hash_block
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    AddPushSource,
    Checkpoint,
    DatasetKind,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransformInput,
    FetchStepUrl,
    MergeStrategy,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MetadataBlock,
    ReadStepNdJson,
    Seed,
    SetDataSchema,
    SetInfo,
    SetLicense,
    SetPollingSource,
    SetVocab,
    SourceState,
    Timestamp,
)
from storage.chain import MetadataChain, metadata_chain
from storage.chain.rules import ChainState
from storage.chain.saved_state import SavedState, SavedStateError, SavedStateStore
from storage.dataset import Dataset
from storage.errors import ChainRuleError
from storage.layout import HEAD_REF, DatasetLayout
from storage.workspace import Workspace
from tests.storage.chain_builder import (
    T0,
    ChainBuilder,
    add_data,
    execute,
    fake_hash,
    schema,
    set_transform,
)

# --- chains covering every part of the state --------------------------------------------------


def ts(seconds: int) -> Timestamp:
    return Timestamp(T0.epoch_nanos + seconds * 1_000_000_000)


def push_source(name: str, merge: MergeStrategy | None = None) -> AddPushSource:
    return AddPushSource(
        source_name=name, read=ReadStepNdJson(), merge=merge or MergeStrategyAppend()
    )


def polling_source(url: str = "https://example.org/a.csv") -> SetPollingSource:
    return SetPollingSource(
        fetch=FetchStepUrl(url=url), read=ReadStepNdJson(), merge=MergeStrategyAppend()
    )


def checkpoint(label: str) -> Checkpoint:
    return Checkpoint(physical_hash=fake_hash(label), size=10)


def root_chain(repeat: int = 1) -> ChainBuilder:
    """A root chain through every root event: push sources added, replaced and disabled, a
    polling source set and disabled, schemas, vocabularies, data with and without slices,
    checkpoints, watermarks and source states, and annotations. ``repeat`` runs the middle part
    again to make it longer."""
    chain = ChainBuilder()
    chain.add(SetInfo(description="root"))
    chain.add(push_source("a"))
    chain.add(push_source("b"))
    chain.add(schema("x"))
    chain.add(SetVocab(event_time_column="t"))
    offset: int | None = None
    last_checkpoint = None
    watermark = 0
    for n in range(repeat):
        start = 0 if offset is None else offset + 1
        chain.add(
            add_data(
                offset,
                start,
                start + 9,
                watermark=ts(watermark + 1),
                prev_checkpoint=last_checkpoint,
                checkpoint=checkpoint(f"c{n}"),
            )
        )
        offset, last_checkpoint, watermark = start + 9, fake_hash(f"c{n}"), watermark + 1
        chain.add(push_source("a", MergeStrategyLedger(primary_key=(f"x{n}",))))
        chain.add(add_data(offset, watermark=ts(watermark + 1), prev_checkpoint=last_checkpoint))
        watermark += 1
        last_checkpoint = None
        chain.add(DisablePushSource(source_name="b"))
        chain.add(push_source("b"))
        chain.add(
            SetLicense(
                short_name="MIT", name="MIT", website_url="https://opensource.org/licenses/MIT"
            )
        )
    chain.add(DisablePushSource(source_name="a"))
    chain.add(DisablePushSource(source_name="b"))
    chain.add(polling_source())
    chain.add(
        AddData(
            prev_offset=offset,
            new_watermark=ts(watermark),
            new_source_state=SourceState(source_name="s", kind="odf/etag", value="1"),
        )
    )
    chain.add(schema("x", "y"))
    chain.add(SetVocab(event_time_column="u"))
    chain.add(DisablePollingSource())
    chain.add(push_source("c"))
    chain.add(SetInfo(description="end"))
    return chain


def derivative_chain(transactions: int = 3) -> ChainBuilder:
    _, input_a = DatasetId.new_generated()
    _, input_b = DatasetId.new_generated()
    chain = ChainBuilder(DatasetKind.DERIVATIVE)
    chain.add(set_transform(input_a, input_b))
    chain.add(schema("x"))
    prev_a = prev_b = None
    out: int | None = None
    for n in range(transactions):
        new_a, new_b = fake_hash(f"a{n}"), fake_hash(f"b{n}")
        inputs = (
            ExecuteTransformInput(
                dataset_id=input_a,
                prev_block_hash=prev_a,
                new_block_hash=new_a,
                prev_offset=None if n == 0 else n * 5 - 1,
                new_offset=n * 5 + 4,
            ),
            ExecuteTransformInput(dataset_id=input_b, prev_block_hash=prev_b, new_block_hash=new_b),
        )
        start = 0 if out is None else out + 1
        chain.add(execute(*inputs, prev_offset=out, start=start, end=start + 2, watermark=ts(n)))
        out, prev_a, prev_b = start + 2, new_a, new_b
        if n == 1:
            chain.add(SetVocab(offset_column="o"))
    return chain


def fold(chain: ChainBuilder) -> list[ChainState]:
    """The state after each block, by applying the rules from the Seed."""
    state = ChainState(chain.dataset_id)
    states = []
    for hash, block in chain.blocks:
        state.apply(hash, block)
        states.append(state.copy())
    return states


def slots(state: ChainState) -> dict[str, object]:
    return {name: getattr(state, name) for name in ChainState.__slots__}


async def store_chain(
    root: Path, chain: ChainBuilder, saved_states: SavedStateStore | None = None
) -> Dataset:
    dataset = Dataset.open_local(root, chain.dataset_id, saved_states=saved_states)
    DatasetLayout(root).create()
    await dataset.blocks.put_many([encode_block(block) for _, block in chain.blocks])
    await dataset.refs.set(HEAD_REF, chain.head, expected=None)
    return dataset


async def saved_state(workspace: Workspace, dataset_id: DatasetId | None) -> SavedState:
    assert dataset_id is not None
    data = await workspace.chain_states.load(dataset_id)
    assert data is not None
    return SavedState.from_bytes(data)


def id_of(dataset: Dataset) -> DatasetId:
    assert dataset.id is not None
    return dataset.id


class CountingReads:
    """Counts block reads of a chain (the cost these tests bound)."""

    def __init__(self, chain: MetadataChain) -> None:
        self.count = 0
        get_bytes = chain.blocks.get_bytes

        async def counted(hash: Multihash) -> bytes:
            self.count += 1
            return await get_bytes(hash)

        # Wraps the method on this one store: the observed reads are the real ones.
        chain.blocks.get_bytes = counted  # type: ignore[method-assign]


# --- saved states ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda: root_chain(2), derivative_chain], ids=["root", "derivative"]
)
async def test_saved_state_restores_the_state_at_every_block(
    make: Callable[[], ChainBuilder],
) -> None:
    chain = make()
    blocks = dict(chain.blocks)

    async def read(hash: Multihash) -> MetadataBlock:
        return blocks[hash]

    for state in fold(chain):
        saved = SavedState.from_bytes(SavedState.of(state).to_bytes())
        assert saved == SavedState.of(state)
        assert slots(await saved.restore(read)) == slots(state)


async def test_a_saved_state_that_does_not_describe_the_chain_is_refused() -> None:
    chain = root_chain()
    blocks = dict(chain.blocks)
    states = fold(chain)

    async def read(hash: Multihash) -> MetadataBlock:
        return blocks[hash]

    schema_at = next(
        n for n, (_, b) in enumerate(chain.blocks) if isinstance(b.event, SetDataSchema)
    )
    at_schema = SavedState.of(states[schema_at])
    before_schema = SavedState.of(states[schema_at - 1])
    broken = {
        "head labelled with the next block": dataclasses.replace(
            before_schema, head=at_schema.head, sequence_number=at_schema.sequence_number
        ),
        "wrong sequence number": dataclasses.replace(at_schema, sequence_number=3),
        "schema names a data block": dataclasses.replace(
            SavedState.of(states[-1]), schema=SavedState.of(states[-1]).last_data
        ),
        "another dataset": dataclasses.replace(at_schema, dataset_id=DatasetId.new_generated()[1]),
    }
    for saved in broken.values():
        with pytest.raises(SavedStateError, match="saved chain state of"):
            await saved.restore(read)


@pytest.mark.parametrize(
    "data", [b"", b"not json", b'{"version": 1}', b"[1, 2]", b'{"version": 2, "head": "x"}']
)
def test_unreadable_saved_state_bytes_are_an_error(data: bytes) -> None:
    with pytest.raises(SavedStateError):
        SavedState.from_bytes(data)


async def test_a_new_process_restores_the_state_from_a_few_blocks(tmp_path: Path) -> None:
    chain = root_chain(repeat=60)  # ~450 blocks
    expected = fold(chain)[-1]
    async with await Workspace.init(tmp_path / "ws") as workspace:
        dataset = await store_chain(
            workspace.layout.dataset(chain.dataset_id).root,
            chain,
            saved_states=workspace.chain_states,
        )
        state = await dataset.chain.state()  # computed over the whole chain, then saved
        assert slots(state) == slots(expected)
        assert (await saved_state(workspace, chain.dataset_id)).head == chain.head

        root = workspace.layout.dataset(chain.dataset_id).root
        fresh = Dataset.open_local(root, chain.dataset_id, saved_states=workspace.chain_states)
        reads = CountingReads(fresh.chain)
        assert slots(await fresh.chain.state()) == slots(expected)
        assert reads.count <= 10, reads.count

        no_saved_states = Dataset.open_local(root, chain.dataset_id)
        reads = CountingReads(no_saved_states.chain)
        assert slots(await no_saved_states.chain.state()) == slots(expected)
        assert reads.count >= len(chain.blocks)


async def test_head_moves_save_the_state_and_a_stale_one_is_caught_up(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        dataset = await workspace.create_dataset("a", DatasetKind.ROOT, [schema("x")])
        old = await saved_state(workspace, dataset.id)
        assert old.head == await dataset.chain.head()
        for n in range(5):
            await dataset.commit_event(
                SetInfo(description=str(n)), expected_head=await dataset.chain.head()
            )
        head = await dataset.chain.head()
        assert (await saved_state(workspace, dataset.id)).head == head

        await workspace.chain_states.save(id_of(dataset), old.head, old.to_bytes())
        fresh = workspace.open_dataset(id_of(dataset))
        reads = CountingReads(fresh.chain)
        state = await fresh.chain.state()
        assert state.head == head and state.sequence_number == 6
        assert slots(state) == slots(await _full_state(fresh))
        assert reads.count < 6 + 10  # the five new blocks and the saved state's blocks


@pytest.mark.parametrize(
    "damage", ["garbage", "other dataset's", "missing blocks", "forked head", "wrong role", "text"]
)
async def test_a_bad_saved_state_falls_back_to_the_chain(tmp_path: Path, damage: str) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        dataset = await workspace.create_dataset(
            "a", DatasetKind.ROOT, [schema("x"), push_source("p")]
        )
        other = await workspace.create_dataset("b", DatasetKind.ROOT, [schema("y")])
        for n in range(3):
            await dataset.commit_event(
                SetInfo(description=str(n)), expected_head=await dataset.chain.head()
            )
        head = await dataset.chain.head()
        assert head is not None
        good = await saved_state(workspace, dataset.id)
        if damage == "garbage":
            data = b"\x00\xffnot a state"
        elif damage == "other dataset's":
            data = (await saved_state(workspace, other.id)).to_bytes()
        elif damage == "missing blocks":
            other_saved = await saved_state(workspace, other.id)
            data = dataclasses.replace(other_saved, dataset_id=id_of(dataset)).to_bytes()
        elif damage == "forked head":
            # A valid state of a fork whose blocks are in the store but are not the chain.
            fork_state = await dataset.chain.state(good.seed, use_current_head=False)
            fork_block = MetadataBlock(
                system_time=Timestamp.now(),
                prev_block_hash=good.seed,
                sequence_number=1,
                event=push_source("fork"),
            )
            fork_hash, fork_bytes = hash_block(fork_block)
            await dataset.blocks.put_bytes(fork_bytes)
            fork_state.apply(fork_hash, fork_block)
            data = SavedState.of(fork_state).to_bytes()
        elif damage == "wrong role":
            data = dataclasses.replace(good, schema=good.push_sources[0]).to_bytes()
        else:
            data = json.dumps({"text": True}).encode()
        await workspace.chain_states.save(id_of(dataset), head, data)
        fresh = workspace.open_dataset(id_of(dataset))
        state = await fresh.chain.state()
        assert slots(state) == slots(await _full_state(fresh))
        assert set(state.push_sources) == {"p"} and state.head == head


async def test_import_saves_and_delete_forgets_the_state(tmp_path: Path) -> None:
    chain = ChainBuilder()
    for event in (schema("x"), push_source("p"), SetInfo(description="imported")):
        chain.add(event)
    source = await store_chain(tmp_path / "folder", chain)
    await source.set_alias("imported")
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await workspace.import_dataset(tmp_path / "folder")
        assert await saved_state(workspace, chain.dataset_id) == SavedState.of(fold(chain)[-1])
        await workspace.delete_dataset("imported")
        assert await workspace.chain_states.load(chain.dataset_id) is None


async def test_repair_does_not_need_saved_states(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        dataset = await workspace.create_dataset("a", DatasetKind.ROOT, [schema("x")])
        head = await dataset.chain.head()
        assert head is not None
        await workspace.chain_states.save(id_of(dataset), head, b"garbage")
        report = await workspace.repair()
        assert [r.alias for r in report.registered] == ["a"] and not report.skipped
        assert (await workspace.open_dataset(id_of(dataset)).chain.state()).schema == schema("x")


async def _full_state(dataset: Dataset) -> ChainState:
    """The fold over the chain, by a chain object that keeps and saves nothing yet."""
    assert dataset.layout is not None
    state = ChainState(dataset.id)
    async for hash, block in Dataset.open_local(dataset.layout.root).chain.iter_blocks_forward():
        state.apply(hash, block)
    return state


# --- states at older blocks ----------------------------------------------------------------------


@pytest.mark.parametrize("order", ["newest first", "oldest first", "random"])
async def test_state_at_every_block_equals_the_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    monkeypatch.setattr(metadata_chain, "STATE_CHECKPOINT_INTERVAL", 16)
    chain = root_chain(repeat=25)  # ~200 blocks
    expected = fold(chain)
    dataset = await store_chain(tmp_path, chain)
    indexes = list(range(len(chain.blocks)))
    if order == "newest first":
        indexes.reverse()
    elif order == "random":
        random.Random(7).shuffle(indexes)
    reads = CountingReads(dataset.chain)
    for n in indexes:
        state = await dataset.chain.state(chain.blocks[n][0], use_current_head=False)
        assert slots(state) == slots(expected[n]), n
    # One pass to the Seed, then at most a checkpoint interval (plus its backward read) each.
    assert reads.count <= 3 * len(chain.blocks) + len(chain.blocks) * 2 * 16


async def test_states_asked_oldest_first_cost_one_pass(tmp_path: Path) -> None:
    chain = derivative_chain(transactions=300)
    expected = fold(chain)
    dataset = await store_chain(tmp_path, chain)
    reads = CountingReads(dataset.chain)
    for n, (hash, _) in enumerate(chain.blocks):
        assert slots(await dataset.chain.state(hash, use_current_head=False)) == slots(expected[n])
    assert reads.count <= 2 * len(chain.blocks) + 1


async def test_forward_iteration_after_known_blocks(tmp_path: Path) -> None:
    chain = root_chain(repeat=10)
    dataset = await store_chain(tmp_path, chain)
    hashes = [h for h, _ in chain.blocks]
    for segment in (3, 1024):
        for known in ([], [hashes[5]], [hashes[5], hashes[40]], [hashes[-1]]):
            got = [
                h
                async for h, _ in dataset.chain.iter_blocks_forward(
                    after=set(known), segment=segment
                )
            ]
            start = max((hashes.index(k) + 1 for k in known), default=0)
            assert got == hashes[start:], (segment, known)


# --- walking back is bounded ---------------------------------------------------------------------


async def test_links_that_cycle_raise_instead_of_looping(tmp_path: Path) -> None:
    """Block files under the wrong names can make links cycle; the walk back must stop."""
    chain = root_chain()
    dataset = await store_chain(tmp_path, chain)
    (second_hash, second), (third_hash, _) = chain.blocks[2:4]
    blocks_dir = DatasetLayout(tmp_path).blocks_dir
    # The file named after block 2 now holds a block linking "up" to block 3: 3 -> 2 -> 3 -> ...
    looping = MetadataBlock(
        system_time=second.system_time,
        prev_block_hash=third_hash,
        sequence_number=second.sequence_number,
        event=second.event,
    )
    (blocks_dir / str(second_hash)).write_bytes(encode_block(looping))
    head = chain.blocks[-1][0]
    for segment in (4, 1024):
        with pytest.raises(ChainRuleError) as caught:
            _ = [item async for item in dataset.chain.iter_blocks_forward(head, segment=segment)]
        assert caught.value.rule == "sequence-number"
        assert caught.value.block_hash in (second_hash, third_hash)
        assert str(caught.value.block_hash) in str(caught.value)
    with pytest.raises(ChainRuleError):
        await Dataset.open_local(tmp_path).chain.state()


async def test_sequence_numbers_must_decrease_walking_back(tmp_path: Path) -> None:
    """Blocks that hash to their names but whose sequence numbers do not decrease."""
    _, dataset_id = DatasetId.new_generated()
    seed = MetadataBlock(
        system_time=T0,
        prev_block_hash=None,
        sequence_number=7,
        event=Seed(dataset_id=dataset_id, dataset_kind=DatasetKind.ROOT),
    )
    seed_hash, seed_bytes = hash_block(seed)
    child = MetadataBlock(
        system_time=T0, prev_block_hash=seed_hash, sequence_number=3, event=SetInfo()
    )
    child_hash, child_bytes = hash_block(child)
    dataset = Dataset.open_local(tmp_path, dataset_id)
    DatasetLayout(tmp_path).create()
    await dataset.blocks.put_many([seed_bytes, child_bytes])
    with pytest.raises(ChainRuleError) as caught:
        _ = [item async for item in dataset.chain.iter_blocks(child_hash)]
    assert caught.value.rule == "sequence-number" and caught.value.block_hash == seed_hash
    assert caught.value.sequence_number == 7


class _FailingSaves(SavedStateStore):
    """A store whose saves fail the way a busy catalog does."""

    async def load(self, dataset_id: DatasetId) -> bytes | None:
        return None

    async def save(self, dataset_id: DatasetId, head: Multihash, data: bytes) -> None:
        raise sqlite3.OperationalError("database is locked")

    async def delete(self, dataset_id: DatasetId) -> None:
        return None


async def test_a_failed_save_does_not_fail_the_commit(tmp_path: Path) -> None:
    chain = root_chain()
    dataset = await store_chain(tmp_path / "a", chain, _FailingSaves())
    head = await dataset.chain.head()
    result = await dataset.commit_event(SetInfo(description="after"), expected_head=head)
    assert await dataset.chain.head() == result.new_head != head
