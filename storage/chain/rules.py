"""The rules every block of a metadata chain obeys, checked one block at a time.

``ChainState`` is the summary of a chain up to some head that the rules need (kind, last offset,
checkpoint and watermark, schema, sources, transform, ...). ``apply`` checks the next block
against it and then advances it, so validating a chain is a single forward pass with constant
memory, and appending to a chain whose state is known costs O(1). Rules follow the spec and
RFC-014 and match what the reference implementation enforces on append; each has a stable
identifier (``ChainRuleError.rule``):

- ``hash-link``: ``prevBlockHash`` is the hash of the preceding block (absent on the first).
- ``sequence-number``: sequence numbers start at 0 and grow by one.
- ``seed-first`` / ``seed-once`` / ``seed-identity``: the first block and only it is a ``Seed``
  (of the dataset expected, when known).
- ``system-time-monotonic``: ``systemTime`` never goes back.
- ``root-only`` / ``derivative-only``: ingest events only on root datasets, transform events only
  on derivative ones.
- ``offset-interval``, ``prev-offset``: ``newData.offsetInterval`` starts right after
  ``prevOffset`` and is not reversed; ``prevOffset`` is the end of the last non-empty slice.
- ``prev-checkpoint``: ``prevCheckpoint`` is the previous data event's ``newCheckpoint``.
- ``watermark-monotonic``: once set, the watermark is carried and never moves back.
- ``schema-before-data``: a ``SetDataSchema`` precedes the first data slice.
- ``schema-evolution``: a new schema only adds columns.
- ``no-op-event``: data events advance something; schemas and push sources are not re-declared.
- ``push-source`` / ``polling-source``: push and polling sources do not coexist; disabling
  requires an active source.
- ``transform-definition``: ``SetTransform`` has unique inputs resolved to dataset ids, with
  aliases, and normalized queries (``queries`` only, last one unaliased, others aliased).
- ``transform-inputs``: ``ExecuteTransform`` follows a ``SetTransform``, lists its inputs in the
  same order, and each input's block and offset intervals continue the previous ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    AddPushSource,
    DatasetKind,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    ExecuteTransformInput,
    FetchStepEthereumLogs,
    MetadataBlock,
    Seed,
    SetAttachments,
    SetDataSchema,
    SetInfo,
    SetLicense,
    SetPollingSource,
    SetTransform,
    SetVocab,
    TransformSql,
)
from storage.chain.schema_rules import incompatible_changes
from storage.errors import ChainRuleError


class ChainState:
    """What the rules need to know about a chain at its head. Mutable; ``copy`` before trying."""

    __slots__ = (
        "dataset_id",
        "head",
        "sequence_number",
        "system_time",
        "kind",
        "last_offset",
        "last_checkpoint",
        "last_watermark",
        "last_source_state",
        "schema",
        "vocab",
        "polling_source",
        "push_sources",
        "transform",
        "transform_input_ids",
        "transform_inputs",
        "seed_block",
        "last_data_block",
        "schema_block",
        "vocab_block",
        "polling_source_block",
        "push_source_blocks",
        "transform_block",
    )

    def __init__(self, dataset_id: DatasetId | None = None) -> None:
        self.dataset_id = dataset_id
        """Expected (before the seed) or actual (after it) dataset id."""
        self.head: Multihash | None = None
        self.sequence_number = -1
        self.system_time: Any = None
        self.kind: DatasetKind | None = None
        self.last_offset: int | None = None
        self.last_checkpoint: Multihash | None = None
        self.last_watermark: Any = None
        self.last_source_state: Any = None
        self.schema: SetDataSchema | None = None
        self.vocab: SetVocab | None = None
        self.polling_source: SetPollingSource | None = None
        self.push_sources: dict[str, AddPushSource] = {}
        self.transform: SetTransform | None = None
        self.transform_input_ids: tuple[DatasetId, ...] = ()
        self.transform_inputs: dict[DatasetId, ExecuteTransformInput] = {}
        """Each input's entry in the last ``ExecuteTransform``."""
        # Hashes of the blocks whose events the fields above come from: everything the state
        # holds is in these few blocks, so ``storage.chain.saved_state`` can persist a state as
        # them and rebuild it by reading them back.
        self.seed_block: Multihash | None = None
        self.last_data_block: Multihash | None = None
        """The last ``AddData`` / ``ExecuteTransform``."""
        self.schema_block: Multihash | None = None
        self.vocab_block: Multihash | None = None
        self.polling_source_block: Multihash | None = None
        self.push_source_blocks: dict[str, Multihash] = {}
        """Same keys, in the same order, as ``push_sources``."""
        self.transform_block: Multihash | None = None

    def copy(self) -> ChainState:
        clone = ChainState.__new__(ChainState)
        for name in ChainState.__slots__:
            setattr(clone, name, getattr(self, name))
        return clone

    def apply(self, hash: Multihash, block: MetadataBlock) -> None:
        """Check that ``block`` (named ``hash``) may follow this state, then advance to it.

        Raises ``ChainRuleError`` and leaves the state unchanged if it may not.
        """
        check = _Check(block, hash)
        if block.prev_block_hash != self.head:
            check.fail(
                "hash-link",
                f"prevBlockHash is {block.prev_block_hash or '<none>'}, "
                f"expected {self.head or '<none> (first block)'}",
            )
        if block.sequence_number != self.sequence_number + 1:
            check.fail(
                "sequence-number",
                f"sequenceNumber is {block.sequence_number}, expected {self.sequence_number + 1}",
            )
        event = block.event
        if self.head is None and not isinstance(event, Seed):
            check.fail("seed-first", f"the first block must carry a Seed event, not {_kind(event)}")
        if self.system_time is not None and block.system_time < self.system_time:
            check.fail(
                "system-time-monotonic",
                f"systemTime {block.system_time} is before the previous block's {self.system_time}",
            )
        handler = _HANDLERS.get(type(event))
        if handler is None:
            check.fail("unknown-event", f"event {_kind(event)} is not a metadata event")
        handler(self, check, event)
        self.head = hash
        self.sequence_number = block.sequence_number
        self.system_time = block.system_time


class _Check:
    """Builds rule errors naming the block under check."""

    __slots__ = ("block", "hash")

    def __init__(self, block: MetadataBlock, hash: Multihash) -> None:
        self.block = block
        self.hash = hash

    def fail(self, rule: str, message: str) -> NoReturn:
        raise ChainRuleError(
            rule, message, sequence_number=self.block.sequence_number, block_hash=self.hash
        )


def _kind(event: object) -> str:
    return type(event).__name__


def _require_kind(state: ChainState, check: _Check, event: object, kind: DatasetKind) -> None:
    if state.kind is not kind:
        rule = "root-only" if kind is DatasetKind.ROOT else "derivative-only"
        check.fail(
            rule,
            f"{_kind(event)} is only allowed on {kind.value} datasets, "
            f"this one is {state.kind.value if state.kind else 'unseeded'}",
        )


# --- identity ---------------------------------------------------------------------------------


def _on_seed(state: ChainState, check: _Check, event: Seed) -> None:
    if state.head is not None:
        check.fail("seed-once", "a Seed event may only be the first block of a chain")
    if state.dataset_id is not None and event.dataset_id != state.dataset_id:
        check.fail(
            "seed-identity", f"event.datasetId is {event.dataset_id}, expected {state.dataset_id}"
        )
    state.dataset_id = event.dataset_id
    state.kind = event.dataset_kind
    state.seed_block = check.hash


# --- data events (RFC-014) --------------------------------------------------------------------


def _check_data_stream(state: ChainState, check: _Check, event: AddData | ExecuteTransform) -> None:
    if event.prev_offset != state.last_offset:
        check.fail(
            "prev-offset",
            f"event.prevOffset is {event.prev_offset}, the last offset "
            f"in the chain is {state.last_offset}",
        )
    new_data = event.new_data
    if new_data is not None:
        interval = new_data.offset_interval
        expected_start = 0 if event.prev_offset is None else event.prev_offset + 1
        if interval.start != expected_start:
            check.fail(
                "offset-interval",
                f"event.newData.offsetInterval.start is {interval.start}, "
                f"expected {expected_start} (prevOffset + 1)",
            )
        if interval.end < interval.start:
            check.fail(
                "offset-interval",
                f"event.newData.offsetInterval [{interval.start}, {interval.end}] is reversed",
            )
        if state.schema is None:
            check.fail("schema-before-data", "data is added before any SetDataSchema event")
    if event.prev_checkpoint != state.last_checkpoint:
        check.fail(
            "prev-checkpoint",
            f"event.prevCheckpoint is {event.prev_checkpoint or '<none>'}, "
            f"the last checkpoint in the chain is {state.last_checkpoint or '<none>'}",
        )
    if state.last_watermark is not None:
        if event.new_watermark is None:
            check.fail(
                "watermark-monotonic",
                "event.newWatermark is missing but the dataset "
                f"already has watermark {state.last_watermark}",
            )
        if event.new_watermark < state.last_watermark:
            check.fail(
                "watermark-monotonic",
                f"event.newWatermark {event.new_watermark} is before "
                f"the current watermark {state.last_watermark}",
            )


def _advance_data_stream(
    state: ChainState, check: _Check, event: AddData | ExecuteTransform
) -> None:
    state.last_data_block = check.hash
    if event.new_data is not None:
        state.last_offset = event.new_data.offset_interval.end
    state.last_checkpoint = (
        None if event.new_checkpoint is None else event.new_checkpoint.physical_hash
    )
    state.last_watermark = event.new_watermark


def _on_add_data(state: ChainState, check: _Check, event: AddData) -> None:
    _require_kind(state, check, event, DatasetKind.ROOT)
    _check_data_stream(state, check, event)
    new_checkpoint = None if event.new_checkpoint is None else event.new_checkpoint.physical_hash
    if (
        event.new_data is None
        and new_checkpoint == event.prev_checkpoint
        and event.new_watermark == state.last_watermark
        and event.new_source_state == state.last_source_state
    ):
        check.fail(
            "no-op-event",
            "AddData neither adds data nor advances the checkpoint, watermark or source state",
        )
    _advance_data_stream(state, check, event)
    state.last_source_state = event.new_source_state


def _on_execute_transform(state: ChainState, check: _Check, event: ExecuteTransform) -> None:
    _require_kind(state, check, event, DatasetKind.DERIVATIVE)
    if state.transform is None:
        check.fail("transform-inputs", "ExecuteTransform is not preceded by a SetTransform")
    declared = state.transform_input_ids
    actual = tuple(i.dataset_id for i in event.query_inputs)
    if actual != declared:
        check.fail(
            "transform-inputs",
            "event.queryInputs list "
            f"[{', '.join(map(str, actual))}], SetTransform declares "
            f"[{', '.join(map(str, declared))}] in that order",
        )
    for n, entry in enumerate(event.query_inputs):
        where = f"event.queryInputs[{n}]"
        previous = state.transform_inputs.get(entry.dataset_id)
        last_block = (
            None if previous is None else (previous.new_block_hash or previous.prev_block_hash)
        )
        last_offset = None if previous is None else _last(previous.new_offset, previous.prev_offset)
        if entry.new_block_hash is not None and entry.new_block_hash == entry.prev_block_hash:
            check.fail(
                "transform-inputs", f"{where} has an empty block interval with newBlockHash set"
            )
        if entry.new_offset is not None and entry.new_offset == entry.prev_offset:
            check.fail(
                "transform-inputs", f"{where} has an empty offset interval with newOffset set"
            )
        if entry.prev_block_hash != last_block:
            check.fail(
                "transform-inputs",
                f"{where}.prevBlockHash is {entry.prev_block_hash or '<none>'}, "
                f"the last block used from this input is {last_block or '<none>'}",
            )
        if entry.prev_offset != last_offset:
            check.fail(
                "transform-inputs",
                f"{where}.prevOffset is {entry.prev_offset}, the last "
                f"offset used from this input is {last_offset}",
            )
        if entry.new_offset is not None and entry.new_block_hash is None:
            check.fail("transform-inputs", f"{where} has newOffset but no newBlockHash")
        if (
            entry.new_offset is not None
            and entry.prev_offset is not None
            and entry.new_offset < entry.prev_offset
        ):
            check.fail(
                "transform-inputs",
                f"{where}.newOffset {entry.new_offset} is before prevOffset {entry.prev_offset}",
            )
    _check_data_stream(state, check, event)
    new_checkpoint = None if event.new_checkpoint is None else event.new_checkpoint.physical_hash
    if (
        event.new_data is None
        and new_checkpoint == event.prev_checkpoint
        and event.new_watermark == state.last_watermark
        and all(i.new_block_hash is None for i in event.query_inputs)
    ):
        check.fail(
            "no-op-event",
            "ExecuteTransform neither adds data nor advances its inputs, checkpoint or watermark",
        )
    _advance_data_stream(state, check, event)
    state.transform_inputs = {i.dataset_id: i for i in event.query_inputs}


def _last(new: int | None, prev: int | None) -> int | None:
    return prev if new is None else new


# --- schema -----------------------------------------------------------------------------------


def _on_set_data_schema(state: ChainState, check: _Check, event: SetDataSchema) -> None:
    previous = state.schema
    if previous is not None:
        if previous == event:
            check.fail("no-op-event", "SetDataSchema repeats the current schema")
        # Legacy events carry only a raw Arrow schema; like the reference, they are not compared.
        if previous.schema is not None and event.schema is not None:
            problems = incompatible_changes(previous.schema, event.schema)
            if problems:
                check.fail(
                    "schema-evolution", "event.schema may only add columns: " + "; ".join(problems)
                )
    elif event.schema is None and event.raw_arrow_schema is None:
        check.fail("schema-evolution", "SetDataSchema carries neither schema nor rawArrowSchema")
    state.schema = event
    state.schema_block = check.hash


def _on_set_vocab(state: ChainState, check: _Check, event: SetVocab) -> None:
    state.vocab = event
    state.vocab_block = check.hash


# --- sources ----------------------------------------------------------------------------------


def _on_set_polling_source(state: ChainState, check: _Check, event: SetPollingSource) -> None:
    _require_kind(state, check, event, DatasetKind.ROOT)
    if event.preprocess is not None:
        _check_transform(check, event.preprocess, "event.preprocess")
    if (
        isinstance(event.fetch, FetchStepEthereumLogs)
        and event.fetch.chain_id is None
        and event.fetch.node_url is None
    ):
        check.fail("polling-source", "event.fetch (EthereumLogs) must specify chainId or nodeUrl")
    _check_read_schema(check, event.read)
    if state.push_sources:
        check.fail(
            "polling-source",
            "a polling source cannot be set while push sources "
            f"{sorted(state.push_sources)} are active",
        )
    state.polling_source = event
    state.polling_source_block = check.hash


def _on_disable_polling_source(
    state: ChainState, check: _Check, event: DisablePollingSource
) -> None:
    _require_kind(state, check, event, DatasetKind.ROOT)
    if state.polling_source is None:
        check.fail("polling-source", "DisablePollingSource without an active polling source")
    state.polling_source = None
    state.polling_source_block = None


def _on_add_push_source(state: ChainState, check: _Check, event: AddPushSource) -> None:
    _require_kind(state, check, event, DatasetKind.ROOT)
    if event.preprocess is not None:
        _check_transform(check, event.preprocess, "event.preprocess")
    _check_read_schema(check, event.read)
    if state.polling_source is not None:
        check.fail("push-source", "a push source cannot be added while a polling source is active")
    if state.push_sources.get(event.source_name) == event:
        check.fail(
            "no-op-event", f"push source '{event.source_name}' is identical to the active one"
        )
    state.push_sources = {**state.push_sources, event.source_name: event}
    state.push_source_blocks = {**state.push_source_blocks, event.source_name: check.hash}


def _on_disable_push_source(state: ChainState, check: _Check, event: DisablePushSource) -> None:
    _require_kind(state, check, event, DatasetKind.ROOT)
    if event.source_name not in state.push_sources:
        check.fail(
            "push-source",
            f"DisablePushSource names '{event.source_name}', which is not an "
            f"active push source (active: {sorted(state.push_sources)})",
        )
    state.push_sources = {k: v for k, v in state.push_sources.items() if k != event.source_name}
    state.push_source_blocks = {
        k: v for k, v in state.push_source_blocks.items() if k != event.source_name
    }


def _check_read_schema(check: _Check, read: object) -> None:
    if getattr(read, "schema", None) is not None and getattr(read, "ddl_schema", None) is not None:
        check.fail(
            "transform-definition", "event.read specifies both schema and the deprecated ddlSchema"
        )


# --- transforms -------------------------------------------------------------------------------


def _on_set_transform(state: ChainState, check: _Check, event: SetTransform) -> None:
    _require_kind(state, check, event, DatasetKind.DERIVATIVE)
    if not event.inputs:
        check.fail("transform-definition", "event.inputs is empty")
    seen: dict[DatasetId, None] = {}
    for n, entry in enumerate(event.inputs):
        dataset_id = _ref_id(entry.dataset_ref)
        if dataset_id is None:
            check.fail(
                "transform-definition",
                f"event.inputs[{n}].datasetRef '{entry.dataset_ref}' "
                "is not resolved to a dataset id",
            )
        if entry.alias is None:
            check.fail("transform-definition", f"event.inputs[{n}].alias is missing")
        if dataset_id in seen:
            check.fail("transform-definition", f"event.inputs[{n}] repeats input {dataset_id}")
        seen[dataset_id] = None
    _check_transform(check, event.transform, "event.transform")
    state.transform = event
    state.transform_input_ids = tuple(seen)
    state.transform_block = check.hash


def declared_input_ids(event: SetTransform) -> tuple[DatasetId | None, ...]:
    """The dataset id each input of ``event`` names, in declaration order (``None`` for a
    reference that is not an id); for a valid event, what ``apply`` records as
    ``ChainState.transform_input_ids``."""
    return tuple(_ref_id(entry.dataset_ref) for entry in event.inputs)


def _check_transform(check: _Check, transform: object, where: str) -> None:
    if not isinstance(transform, TransformSql):
        return
    if transform.query is not None:
        check.fail("transform-definition", f"{where}.query must be normalized into queries")
    if not transform.queries:
        check.fail("transform-definition", f"{where}.queries is empty")
    if transform.queries[-1].alias is not None:
        check.fail(
            "transform-definition",
            f"{where}.queries: the last query is the output and must have no alias",
        )
    for n, step in enumerate(transform.queries[:-1]):
        if step.alias is None:
            check.fail(
                "transform-definition",
                f"{where}.queries[{n}] needs an alias (only the last query may have none)",
            )


def _ref_id(ref: object) -> DatasetId | None:
    if isinstance(ref, DatasetId):
        return ref
    inner = getattr(ref, "id", None)
    if isinstance(inner, DatasetId):
        return inner
    try:
        return DatasetId.parse(str(ref))
    except ParseError:
        return None


def _on_annotation(state: ChainState, check: _Check, event: object) -> None:
    """SetInfo, SetLicense and SetAttachments describe the dataset and constrain nothing."""


_HANDLERS: dict[type, Callable[[ChainState, _Check, Any], None]] = {
    Seed: _on_seed,
    AddData: _on_add_data,
    ExecuteTransform: _on_execute_transform,
    SetDataSchema: _on_set_data_schema,
    SetVocab: _on_set_vocab,
    SetPollingSource: _on_set_polling_source,
    DisablePollingSource: _on_disable_polling_source,
    AddPushSource: _on_add_push_source,
    DisablePushSource: _on_disable_push_source,
    SetTransform: _on_set_transform,
    SetInfo: _on_annotation,
    SetLicense: _on_annotation,
    SetAttachments: _on_annotation,
}
