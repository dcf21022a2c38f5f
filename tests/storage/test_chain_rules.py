"""Every chain rule, each broken by one block: the error must name the rule and the block."""

from __future__ import annotations

from typing import Unpack

import pytest

from protocol.identity import DatasetId, DatasetRef
from protocol.model import (
    AddData,
    AddPushSource,
    Checkpoint,
    DataField,
    DataSchema,
    DatasetKind,
    DataTypeInt64,
    DataTypeOption,
    DataTypeString,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransformInput,
    FetchStepEthereumLogs,
    FetchStepUrl,
    MergeStrategyAppend,
    MetadataEvent,
    ReadStepNdJson,
    Seed,
    SetDataSchema,
    SetInfo,
    SetLicense,
    SetPollingSource,
    SetTransform,
    SetVocab,
    SourceState,
    SqlQueryStep,
    Timestamp,
    TransformInput,
    TransformSql,
)
from storage.chain.rules import ChainState
from storage.errors import ChainRuleError
from tests.storage.chain_builder import (
    T0,
    BlockOverrides,
    ChainBuilder,
    add_data,
    execute,
    fake_hash,
    schema,
    set_transform,
)


def replay(chain: ChainBuilder) -> ChainState:
    state = ChainState(chain.dataset_id)
    for hash, block in chain.blocks:
        state.apply(hash, block)
    return state


def assert_breaks(
    chain: ChainBuilder, rule: str, event: MetadataEvent, **overrides: Unpack[BlockOverrides]
) -> ChainRuleError:
    state = replay(chain)
    before = (state.head, state.sequence_number, state.last_offset, state.schema)
    hash, block = chain.next_block(event, **overrides)
    with pytest.raises(ChainRuleError) as caught:
        state.apply(hash, block)
    error = caught.value
    assert error.rule == rule, str(error)
    assert error.block_hash == hash and error.sequence_number == block.sequence_number
    assert f"[{rule}]" in str(error) and str(hash) in str(error)
    assert (state.head, state.sequence_number, state.last_offset, state.schema) == before
    return error


def root_with_schema() -> ChainBuilder:
    chain = ChainBuilder()
    chain.add(schema("a"))
    return chain


def ts(seconds: int) -> Timestamp:
    return Timestamp(T0.epoch_nanos + seconds * 1_000_000_000)


def push_source(name: str = "default") -> AddPushSource:
    return AddPushSource(source_name=name, read=ReadStepNdJson(), merge=MergeStrategyAppend())


def polling_source() -> SetPollingSource:
    return SetPollingSource(
        fetch=FetchStepUrl(url="https://example.org/a.csv"),
        read=ReadStepNdJson(),
        merge=MergeStrategyAppend(),
    )


def derivative(*inputs: DatasetId) -> ChainBuilder:
    chain = ChainBuilder(DatasetKind.DERIVATIVE)
    chain.add(set_transform(*inputs))
    chain.add(schema("a"))
    return chain


# --- a valid chain passes ---------------------------------------------------------------------


def test_valid_root_and_derivative_chains_pass() -> None:
    chain = root_with_schema()
    chain.add(push_source())
    chain.add(add_data(None, 0, 9, watermark=ts(10)))
    chain.add(add_data(9, watermark=ts(20)))  # watermark only
    chain.add(
        add_data(
            9,
            10,
            19,
            watermark=ts(20),
            checkpoint=Checkpoint(physical_hash=fake_hash("cp1"), size=5),
        )
    )
    chain.add(
        add_data(
            19,
            prev_checkpoint=fake_hash("cp1"),
            watermark=ts(20),
            checkpoint=Checkpoint(physical_hash=fake_hash("cp2"), size=5),
        )
    )
    chain.add(SetInfo(description="d"))
    chain.add(schema("a", "b"))
    chain.add(add_data(19, 20, 20, prev_checkpoint=fake_hash("cp2"), watermark=ts(30)))
    state = replay(chain)
    assert (state.sequence_number, state.last_offset, state.last_watermark) == (9, 20, ts(30))
    assert state.kind is DatasetKind.ROOT and state.dataset_id == chain.dataset_id

    _, a = DatasetId.new_generated()
    _, b = DatasetId.new_generated()
    d = derivative(a, b)
    d.add(
        execute(
            ExecuteTransformInput(dataset_id=a, new_block_hash=fake_hash("a1"), new_offset=4),
            ExecuteTransformInput(dataset_id=b),
            start=0,
            end=2,
            watermark=ts(5),
        )
    )
    d.add(
        execute(
            ExecuteTransformInput(dataset_id=a, prev_block_hash=fake_hash("a1"), prev_offset=4),
            ExecuteTransformInput(dataset_id=b, new_block_hash=fake_hash("b1"), new_offset=0),
            prev_offset=2,
            watermark=ts(6),
        )
    )
    assert replay(d).transform_inputs[b].new_offset == 0


# --- structure --------------------------------------------------------------------------------


def test_hash_link() -> None:
    assert_breaks(
        root_with_schema(), "hash-link", SetInfo(), prev_block_hash=fake_hash("elsewhere")
    )


def test_sequence_number() -> None:
    assert_breaks(root_with_schema(), "sequence-number", SetInfo(), sequence_number=5)


def test_seed_first() -> None:
    chain = ChainBuilder()
    chain.blocks.clear()
    assert_breaks(chain, "seed-first", SetInfo(), prev_block_hash=None, sequence_number=0)


def test_seed_once() -> None:
    chain = root_with_schema()
    assert_breaks(
        chain, "seed-once", Seed(dataset_id=chain.dataset_id, dataset_kind=DatasetKind.ROOT)
    )


def test_seed_identity() -> None:
    chain = ChainBuilder()
    seed_hash, seed = chain.blocks[0]
    _, other = DatasetId.new_generated()
    with pytest.raises(ChainRuleError, match=r"\[seed-identity\]"):
        ChainState(other).apply(seed_hash, seed)


def test_system_time_monotonic() -> None:
    assert_breaks(root_with_schema(), "system-time-monotonic", SetInfo(), system_time=ts(-100))


def test_root_only_events_on_derivative() -> None:
    chain = ChainBuilder(DatasetKind.DERIVATIVE)
    assert_breaks(chain, "root-only", add_data(None, watermark=ts(1)))
    assert_breaks(chain, "root-only", push_source())
    assert_breaks(chain, "root-only", polling_source())


def test_derivative_only_events_on_root() -> None:
    _, a = DatasetId.new_generated()
    chain = ChainBuilder()
    assert_breaks(chain, "derivative-only", set_transform(a))
    assert_breaks(
        chain,
        "derivative-only",
        execute(ExecuteTransformInput(dataset_id=a, new_block_hash=fake_hash("x"))),
    )


# --- RFC-014 offsets, checkpoints, watermarks -------------------------------------------------


def test_offset_interval_must_start_after_prev_offset() -> None:
    chain = root_with_schema()
    chain.add(add_data(None, 0, 9))
    assert_breaks(chain, "offset-interval", add_data(9, 11, 20))


def test_offset_interval_must_not_be_reversed() -> None:
    chain = root_with_schema()
    chain.add(add_data(None, 0, 9))
    assert "is reversed" in str(assert_breaks(chain, "offset-interval", add_data(9, 10, 5)))


def test_prev_offset_must_be_last_offset() -> None:
    chain = root_with_schema()
    chain.add(add_data(None, 0, 9))
    error = assert_breaks(chain, "prev-offset", add_data(7, 8, 12))
    assert "prevOffset is 7" in str(error) and "last offset in the chain is 9" in str(error)
    assert_breaks(root_with_schema(), "prev-offset", add_data(3, 4, 5))


def test_prev_checkpoint() -> None:
    chain = root_with_schema()
    chain.add(add_data(None, 0, 1, checkpoint=Checkpoint(physical_hash=fake_hash("c"), size=1)))
    assert_breaks(chain, "prev-checkpoint", add_data(1, 2, 3))
    assert_breaks(chain, "prev-checkpoint", add_data(1, 2, 3, prev_checkpoint=fake_hash("other")))


def test_watermark_never_moves_back_or_disappears() -> None:
    chain = root_with_schema()
    chain.add(add_data(None, 0, 1, watermark=ts(100)))
    assert_breaks(chain, "watermark-monotonic", add_data(1, 2, 3, watermark=ts(50)))
    assert_breaks(chain, "watermark-monotonic", add_data(1, 2, 3))


def test_schema_before_data() -> None:
    assert_breaks(ChainBuilder(), "schema-before-data", add_data(None, 0, 9))


# --- schema evolution -------------------------------------------------------------------------


def test_schema_may_add_columns_but_not_remove_or_retype() -> None:
    chain = root_with_schema()
    chain.add(schema("a", "b"))
    error = assert_breaks(chain, "schema-evolution", schema("b"))
    assert "'a' was removed" in str(error)
    retyped = SetDataSchema(
        schema=DataSchema(
            fields=tuple(
                DataField(name=f.name, type=DataTypeInt64() if f.name == "a" else f.type)
                for f in chain.blocks[-1][1].event.schema.fields
            )
        )
    )
    assert "'a' changed type from string to int64" in str(
        assert_breaks(chain, "schema-evolution", retyped)
    )
    optional = SetDataSchema(
        schema=DataSchema(
            fields=tuple(
                DataField(
                    name=f.name,
                    type=DataTypeOption(inner=DataTypeString()) if f.name == "a" else f.type,
                )
                for f in chain.blocks[-1][1].event.schema.fields
            )
        )
    )
    assert_breaks(chain, "schema-evolution", optional)


def test_repeating_the_schema_is_a_no_op() -> None:
    assert_breaks(root_with_schema(), "no-op-event", schema("a"))


# --- no-op data events ------------------------------------------------------------------------


def test_add_data_that_changes_nothing() -> None:
    chain = root_with_schema()
    chain.add(add_data(None, 0, 1, watermark=ts(5)))
    assert_breaks(chain, "no-op-event", add_data(1, watermark=ts(5)))


def test_add_data_advancing_source_state_is_not_a_no_op() -> None:
    chain = root_with_schema()
    state = SourceState(source_name="s", kind="odf/etag", value="1")
    chain.add(AddData(new_source_state=state))
    assert_breaks(chain, "no-op-event", AddData(new_source_state=state))


def test_execute_transform_that_advances_nothing() -> None:
    _, a = DatasetId.new_generated()
    chain = derivative(a)
    assert_breaks(chain, "no-op-event", execute(ExecuteTransformInput(dataset_id=a)))


# --- sources ----------------------------------------------------------------------------------


def test_push_source_rules() -> None:
    chain = root_with_schema()
    chain.add(polling_source())
    assert_breaks(chain, "push-source", push_source())
    chain = root_with_schema()
    chain.add(push_source("a"))
    assert_breaks(chain, "no-op-event", push_source("a"))
    assert_breaks(chain, "push-source", DisablePushSource(source_name="b"))
    chain.add(DisablePushSource(source_name="a"))
    assert_breaks(chain, "push-source", DisablePushSource(source_name="a"))


def test_polling_source_rules() -> None:
    chain = root_with_schema()
    chain.add(push_source())
    assert_breaks(chain, "polling-source", polling_source())
    assert_breaks(chain, "polling-source", DisablePollingSource())
    eth = SetPollingSource(
        fetch=FetchStepEthereumLogs(), read=ReadStepNdJson(), merge=MergeStrategyAppend()
    )
    assert_breaks(root_with_schema(), "polling-source", eth)
    chain = root_with_schema()
    chain.add(polling_source())
    chain.add(DisablePollingSource())
    chain.add(push_source())
    assert replay(chain).push_sources


# --- transforms -------------------------------------------------------------------------------


def test_transform_definition_rules() -> None:
    _, a = DatasetId.new_generated()
    chain = ChainBuilder(DatasetKind.DERIVATIVE)
    good = set_transform(a)
    sql = good.transform
    cases = {
        "inputs is empty": SetTransform(inputs=(), transform=sql),
        "not resolved to a dataset id": SetTransform(
            inputs=(TransformInput(dataset_ref=DatasetRef.parse("by-name"), alias="x"),),
            transform=sql,
        ),
        "alias is missing": SetTransform(
            inputs=(TransformInput(dataset_ref=DatasetRef(a)),), transform=sql
        ),
        "repeats input": SetTransform(inputs=good.inputs * 2, transform=sql),
        "must be normalized": SetTransform(
            inputs=good.inputs, transform=TransformSql(engine="spark", query="select 1")
        ),
        "queries is empty": SetTransform(
            inputs=good.inputs, transform=TransformSql(engine="spark", queries=())
        ),
        "must have no alias": SetTransform(
            inputs=good.inputs,
            transform=TransformSql(
                engine="spark", queries=(SqlQueryStep(alias="out", query="select 1"),)
            ),
        ),
        "needs an alias": SetTransform(
            inputs=good.inputs,
            transform=TransformSql(
                engine="spark",
                queries=(SqlQueryStep(query="select 1"), SqlQueryStep(query="select 2")),
            ),
        ),
    }
    for fragment, event in cases.items():
        assert fragment in str(assert_breaks(chain, "transform-definition", event))


def test_execute_transform_inputs_rules() -> None:
    _, a = DatasetId.new_generated()
    _, b = DatasetId.new_generated()
    bare = ChainBuilder(DatasetKind.DERIVATIVE)
    assert "not preceded by a SetTransform" in str(
        assert_breaks(
            bare,
            "transform-inputs",
            execute(ExecuteTransformInput(dataset_id=a, new_block_hash=fake_hash("a1"))),
        )
    )
    chain = derivative(a, b)
    assert "in that order" in str(
        assert_breaks(
            chain,
            "transform-inputs",
            execute(
                ExecuteTransformInput(dataset_id=b),
                ExecuteTransformInput(dataset_id=a, new_block_hash=fake_hash("a1")),
            ),
        )
    )
    chain.add(
        execute(
            ExecuteTransformInput(dataset_id=a, new_block_hash=fake_hash("a1"), new_offset=3),
            ExecuteTransformInput(dataset_id=b),
            start=0,
            end=3,
        )
    )
    cases = {
        "prevBlockHash is": execute(
            ExecuteTransformInput(
                dataset_id=a,
                prev_block_hash=fake_hash("zz"),
                new_block_hash=fake_hash("a2"),
                prev_offset=3,
                new_offset=5,
            ),
            ExecuteTransformInput(dataset_id=b),
            prev_offset=3,
            start=4,
            end=5,
        ),
        "prevOffset is": execute(
            ExecuteTransformInput(
                dataset_id=a,
                prev_block_hash=fake_hash("a1"),
                new_block_hash=fake_hash("a2"),
                prev_offset=2,
                new_offset=5,
            ),
            ExecuteTransformInput(dataset_id=b),
            prev_offset=3,
            start=4,
            end=5,
        ),
        "newOffset but no newBlockHash": execute(
            ExecuteTransformInput(
                dataset_id=a, prev_block_hash=fake_hash("a1"), prev_offset=3, new_offset=5
            ),
            ExecuteTransformInput(dataset_id=b),
            prev_offset=3,
            start=4,
            end=5,
        ),
        "empty block interval": execute(
            ExecuteTransformInput(
                dataset_id=a,
                prev_block_hash=fake_hash("a1"),
                new_block_hash=fake_hash("a1"),
                prev_offset=3,
            ),
            ExecuteTransformInput(dataset_id=b),
            prev_offset=3,
            start=4,
            end=5,
        ),
    }
    for fragment, event in cases.items():
        assert fragment in str(assert_breaks(chain, "transform-inputs", event))


def test_annotations_are_accepted_anywhere_after_seed() -> None:
    chain = ChainBuilder(DatasetKind.DERIVATIVE)
    chain.add(
        SetLicense(short_name="MIT", name="MIT", website_url="https://opensource.org/licenses/MIT")
    )
    chain.add(SetVocab(event_time_column="t"))
    chain.add(SetInfo(description="x"))
    assert replay(chain).vocab == SetVocab(event_time_column="t")
