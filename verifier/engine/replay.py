"""Rebuilds the engine request of a recorded ``ExecuteTransform`` so it can be run again.

Everything comes from the chains: the transform, vocabulary and watermark as of the block before,
the inputs' slices from the block and offset intervals the event records, its system time, first
offset and previous checkpoint. Running the request must give a slice with the recorded logical
hash (the verifier's reproducibility check).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from protocol.identity import DatasetId, Multihash
from protocol.model import ExecuteTransform
from storage.chain.rules import ChainState
from storage.dataset import Dataset
from storage.dataset_storage import local_file
from storage.errors import StorageError
from verifier.engine.columns import Vocab
from verifier.engine.contract import TransformRequest, validate_transform
from verifier.engine.inputs import input_slice
from verifier.errors import VerifierError


class ReplayError(VerifierError):
    """A block cannot be replayed (not an ExecuteTransform, or its context is missing)."""


async def replay_request(
    dataset: Dataset,
    block_hash: Multihash,
    open_input: Callable[[DatasetId], Awaitable[Dataset]],
    out_dir: Path,
    *,
    before: ChainState | None = None,
) -> TransformRequest:
    """The request that, executed, reproduces the slice of block ``block_hash`` of ``dataset``.

    ``before`` is the chain's state at the previous block, if the caller has it (replaying a
    chain oldest first, it does); otherwise it is read from the chain.
    """
    block = await dataset.chain.get_block(block_hash)
    event = block.event
    where = f"{await dataset.alias() or dataset.id} block #{block.sequence_number} ({block_hash})"
    if not isinstance(event, ExecuteTransform):
        raise ReplayError(f"{where} is a {type(event).__name__}, not an ExecuteTransform")
    if before is None:
        before = await dataset.chain.state(block.prev_block_hash)
    elif before.head != block.prev_block_hash:
        raise ReplayError(
            f"{where}: the state given is at {before.head}, not at the previous block"
        )
    if before.transform is None:
        raise ReplayError(f"{where} has no SetTransform before it")
    aliases = {}
    for declared in before.transform.inputs:
        ref = declared.dataset_ref
        dataset_id = ref if isinstance(ref, DatasetId) else getattr(ref, "id", None)
        aliases[dataset_id] = declared.alias or str(dataset_id)
    inputs = []
    for query_input in event.query_inputs:
        if query_input.dataset_id not in aliases:
            raise ReplayError(
                f"{where}: input {query_input.dataset_id} is not declared by the transform"
            )
        input_dataset = await open_input(query_input.dataset_id)
        inputs.append(
            await input_slice(input_dataset, query_input, aliases[query_input.dataset_id])
        )
    prev_checkpoint = None
    if event.prev_checkpoint is not None:
        try:
            prev_checkpoint = await local_file(dataset.checkpoints, event.prev_checkpoint)
        except StorageError as err:
            raise ReplayError(f"{where}: its previous checkpoint cannot be read: {err}") from None
    return TransformRequest(
        dataset_alias=await dataset.alias() or str(dataset.id),
        transform=validate_transform(before.transform.transform, where),
        vocab=Vocab.of(before.vocab),
        system_time=block.system_time,
        next_offset=0 if event.prev_offset is None else event.prev_offset + 1,
        inputs=tuple(inputs),
        prev_checkpoint=prev_checkpoint,
        out_dir=out_dir,
        prev_watermark=before.last_watermark,
        spill_dir=str(out_dir),
    )
