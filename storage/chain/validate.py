"""Whole-chain validation, shared by ``odfd import`` and the verifier's metadata check."""

from __future__ import annotations

from contextlib import aclosing

from protocol.identity import DatasetId, Multihash
from storage.chain.metadata_chain import MetadataChain, check_block_objects, fault_error
from storage.chain.reader import ChainFault, read_forward
from storage.chain.rules import ChainState
from storage.stores.base import ObjectStore


async def validate_chain(
    chain: MetadataChain,
    head: Multihash | None = None,
    *,
    dataset_id: DatasetId | None = None,
    data: ObjectStore | None = None,
    checkpoints: ObjectStore | None = None,
) -> ChainState:
    """Check every block from the seed to ``head`` (default: current head) oldest first.

    Every block file is re-hashed against its name and every rule is applied; with ``data`` /
    ``checkpoints``, every object a block names must be present with the recorded size (hashing
    their content is the verifier's data-integrity check). Memory does not grow with the chain.
    Returns the state at ``head``; raises ``ChainRuleError`` at the first violation.
    """
    state = ChainState(dataset_id if dataset_id is not None else chain.dataset_id)
    check_objects = data is not None or checkpoints is not None
    head = head if head is not None else await chain.head()
    # Straight from the reader: one async-generator step per block less than iter_blocks_forward.
    async with aclosing(read_forward(chain.blocks, head)) as items:
        async for item in items:
            if isinstance(item, ChainFault):
                raise fault_error(item)
            state.apply(item.hash, item.block)
            if check_objects:
                await check_block_objects(item.hash, item.block, data, checkpoints)
    return state
