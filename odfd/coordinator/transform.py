"""Updating a derivative dataset: plan the next transform transaction, run it, commit it.

Planning (RFC-014): for every input of the dataset's ``SetTransform``, the blocks and records
not yet used are ``(last used block, input head]`` and ``(last used offset, input's last offset]``,
continuing the previous ``ExecuteTransform``. The engine reads exactly those slices; the result
is committed as an ``ExecuteTransform`` (preceded by a ``SetDataSchema`` the first time, or when
the query adds columns) with the new slice, the engine's checkpoint and the output watermark.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from odfd.coordinator.commit import StagedFiles, commit_transaction, transaction_dir
from odfd.coordinator.schema import schema_event
from odfd.errors import OdfdError
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    ExecuteTransform,
    ExecuteTransformInput,
    Timestamp,
)
from storage.chain.rules import ChainState
from storage.dataset import Dataset
from storage.dataset_storage import local_file
from storage.errors import ObjectNotFoundError
from storage.workspace import Workspace
from verifier.engine.columns import Vocab
from verifier.engine.contract import TransformInputSlice, TransformRequest
from verifier.engine.inputs import arrow_schema_of, input_slice
from verifier.engine.registry import Engines


class TransformNotDefinedError(OdfdError):
    """The dataset is not derivative or has no ``SetTransform``."""


class InputHistoryRewrittenError(OdfdError):
    """An input's history no longer holds the block the last transaction read up to (it was
    compacted or reset): the derivative's history cannot continue from it."""


@dataclass(frozen=True, slots=True)
class TransformOutcome:
    """What one transform transaction did (``up_to_date`` when there was nothing to do)."""

    dataset: str
    up_to_date: bool
    old_head: Multihash | None = None
    new_head: Multihash | None = None
    num_records: int = 0
    reason: str | None = None


async def update_derivative(
    workspace: Workspace,
    dataset: Dataset,
    *,
    engines: Engines,
    system_time: Timestamp | None = None,
) -> TransformOutcome:
    """Runs the next transaction of ``dataset``'s transform, if its inputs have anything new, in
    the engine the transform names."""
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    if state.transform is None:
        raise TransformNotDefinedError(f"{alias} has no transform (it is not a derivative dataset)")
    transform, engine = engines.for_transform(state.transform.transform, alias)

    query_inputs: list[ExecuteTransformInput] = []
    engine_inputs: list[TransformInputSlice] = []
    for declared in state.transform.inputs:
        input_id = _input_id(declared.dataset_ref, alias)
        input_dataset = await workspace.get_dataset(str(input_id))
        input_state = await input_dataset.chain.state()
        if input_state.schema is None:
            return TransformOutcome(alias, True, reason=f"input {declared.alias} has no data yet")
        query_input = next_query_input(input_id, state, input_state)
        last_read = query_input.prev_block_hash
        if last_read is not None and not await _in_history(input_dataset, last_read):
            raise InputHistoryRewrittenError(
                f"{alias} last read input {declared.alias or input_id} up to block {last_read}, "
                "which is no longer in that input's history (it was compacted or reset); pull it "
                "with --reset-derivatives-on-diverged-input, or run `odfd compact "
                f"--keep-metadata-only {alias}` and pull it again, to recompute it from the new "
                "history"
            )
        query_inputs.append(query_input)
        engine_inputs.append(
            await input_slice(input_dataset, query_input, declared.alias or str(input_id))
        )

    if state.schema is not None and all(
        i.offset_interval is None and not i.explicit_watermarks for i in engine_inputs
    ):
        return TransformOutcome(alias, True, reason="no new input data")

    time = system_time or Timestamp.now()
    async with transaction_dir(workspace.root) as work:
        request = TransformRequest(
            dataset_alias=alias,
            transform=transform,
            vocab=Vocab.of(state.vocab),
            system_time=time,
            next_offset=0 if state.last_offset is None else state.last_offset + 1,
            inputs=tuple(engine_inputs),
            prev_checkpoint=await local_file(dataset.checkpoints, state.last_checkpoint)
            if state.last_checkpoint
            else None,
            out_dir=work,
            prev_watermark=state.last_watermark,
            spill_dir=str(work),
            dataset_schema=None if state.schema is None else arrow_schema_of(state.schema),
        )
        result = await asyncio.to_thread(engine.run_transform, request)
        written = result.new_data
        event = ExecuteTransform(
            query_inputs=tuple(query_inputs),
            prev_checkpoint=state.last_checkpoint,
            prev_offset=state.last_offset,
            new_data=None if written is None else written.as_data_slice(),
            new_checkpoint=None
            if result.new_checkpoint is None
            else result.new_checkpoint.as_checkpoint(),
            new_watermark=result.new_watermark,
        )
        events = [e for e in (schema_event(state.schema, result.schema, alias),) if e is not None]
        commit = await commit_transaction(
            dataset,
            [*events, event],
            StagedFiles(
                data_file=written.path if written else None,
                checkpoint_file=result.new_checkpoint.path if result.new_checkpoint else None,
            ),
            expected_head=state.head,
            system_time=time,
        )
    return TransformOutcome(
        alias, False, commit.old_head, commit.new_head, written.num_records if written else 0
    )


def next_query_input(
    input_id: DatasetId, state: ChainState, input_state: ChainState
) -> ExecuteTransformInput:
    """The input's interval for the next transaction: from where the last one stopped to its head."""
    previous = state.transform_inputs.get(input_id)
    prev_block = None if previous is None else (previous.new_block_hash or previous.prev_block_hash)
    prev_offset = None
    if previous is not None:
        prev_offset = (
            previous.new_offset if previous.new_offset is not None else previous.prev_offset
        )
    head, last_offset = input_state.head, input_state.last_offset
    return ExecuteTransformInput(
        dataset_id=input_id,
        prev_block_hash=prev_block,
        new_block_hash=head if head != prev_block else None,
        prev_offset=prev_offset,
        new_offset=last_offset if last_offset != prev_offset else None,
    )


async def _in_history(dataset: Dataset, block_hash: Multihash) -> bool:
    """Whether ``block_hash`` is the head of ``dataset`` or one of its ancestors."""
    try:
        target = await dataset.chain.get_block(block_hash)
    except ObjectNotFoundError:
        return False
    async for hash, block in dataset.chain.iter_blocks():
        if block.sequence_number <= target.sequence_number:
            return hash == block_hash
    return False


def _input_id(ref: object, alias: str) -> DatasetId:
    if isinstance(ref, DatasetId):
        return ref
    inner = getattr(ref, "id", None)
    if isinstance(inner, DatasetId):
        return inner
    raise TransformNotDefinedError(
        f"{alias}: transform input {ref} is not resolved to a dataset id"
    )
