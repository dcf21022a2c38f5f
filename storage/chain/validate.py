"""Whole-chain validation, shared by ``odfd import`` and the verifier's metadata check."""

from __future__ import annotations

from protocol.identity import DatasetId, Multihash
from storage.chain.metadata_chain import MetadataChain, check_block_objects
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
    async for hash, block in chain.iter_blocks_forward(head):
        state.apply(hash, block)
        if check_objects:
            await check_block_objects(hash, block, data, checkpoints)
    return state
