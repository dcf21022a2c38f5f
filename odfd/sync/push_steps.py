"""What every push strategy shares (``odfd.sync.transport``: smart HTTP, a folder or bucket,
IPNS): its options and result, comparing the local history with the remote's, and the blocks
and objects the remote lacks.

A remote on the same history and behind is brought forward; a remote ahead or diverged is
refused unless ``force`` (then the remote's history is replaced from the last shared block).
"""

from __future__ import annotations

from dataclasses import dataclass

from odfd.sync.errors import ChainPoint, DivergedError, RemoteAheadError
from odfd.sync.objects import ObjectRef, objects_of
from odfd.sync.target import PullTarget
from odfd.sync.walk import BlockStash, FetchBlock, LocalCursor, VerifiedBlock, walk_remote_chain
from protocol.identity import Multihash
from protocol.model import AddData, ExecuteTransform


@dataclass(frozen=True, slots=True)
class PushOptions:
    force: bool = False
    token: str | None = None
    parallel: int = 8


@dataclass(frozen=True, slots=True)
class PushResult:
    alias: str
    remote: str
    old_remote_head: Multihash | None
    new_remote_head: Multihash | None
    num_blocks: int
    num_objects: int
    signed: bool = False
    """Whether the remote now holds the dataset's signed head (``docs/signed-heads.md``)."""

    @property
    def updated(self) -> bool:
        return self.num_blocks > 0 or self.new_remote_head != self.old_remote_head

    def describe(self) -> str:
        if self.num_blocks == 0 and self.updated:
            return f"{self.remote}'s head reset to ours, {self.new_remote_head}"
        if self.num_blocks == 0:
            return f"{self.remote} is up to date"
        return (
            f"{self.num_blocks} block(s), {self.num_objects} object(s) to {self.remote}; "
            f"remote head {self.new_remote_head}"
        )


async def compare(
    target: PullTarget,
    remote_head: Multihash | None,
    fetch: FetchBlock,
    where: str,
    force: bool,
) -> ChainPoint | None:
    """The last block both histories share (``None``: push everything), or an error when the
    remote is ahead or diverged and not ``force``."""
    local = target.head
    if remote_head is None:
        return None
    if remote_head == local.hash:
        return local
    chain = target.dataset.chain
    if await chain.blocks.contains(remote_head):
        async for hash, block in chain.iter_blocks(local.hash):
            if hash == remote_head:
                return ChainPoint(hash, block.sequence_number)
    walk = await walk_remote_chain(
        remote_head,
        fetch,
        LocalCursor(chain, local.hash, local.sequence_number),
        BlockStash(None),
        where=where,
    )
    if not force:
        if walk.common is not None and walk.common.hash == local.hash:
            raise RemoteAheadError(
                f"push {target.alias} to {where}: the remote is {len(walk.new_blocks)} "
                "block(s) ahead on the same history; pull first (or --force)"
            )
        raise DivergedError(
            f"push {target.alias} to {where}",
            local,
            walk.remote,
            walk.common,
            hint="pull and reconcile, or use --force to replace the remote's history",
        )
    return walk.common


@dataclass(frozen=True, slots=True)
class Outgoing:
    """What the remote lacks: our blocks after the shared one, oldest first, and their objects."""

    items: list[tuple[Multihash, bytes, VerifiedBlock]]
    objects: list[ObjectRef]

    @property
    def verified(self) -> list[VerifiedBlock]:
        return [item for _, _, item in self.items]

    @property
    def records(self) -> int:
        """Records the outgoing blocks add."""
        total = 0
        for item in self.verified:
            event = item.block.event
            if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
                interval = event.new_data.offset_interval
                total += interval.end - interval.start + 1
        return total


async def outgoing(target: PullTarget, common: ChainPoint | None) -> Outgoing | None:
    """``None`` when the remote is at our head already."""
    head = target.head.hash
    assert head is not None  # push() refuses a dataset without blocks
    if common is not None and common.hash == head:
        return None
    chain = target.dataset.chain
    items = []
    async for hash, block in chain.iter_blocks(head, common.hash if common else None):
        items.append((hash, await chain.get_block_bytes(hash), VerifiedBlock(hash, block)))
    items.reverse()
    return Outgoing(items, objects_of([item for _, _, item in items]))
