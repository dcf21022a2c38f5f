"""The cheap "has the head changed?" check a mirror makes before pulling: read ``refs/head``
(one small request); only when it is new, fetch its block (one more), check it against its hash
and decode it for its sequence number (``storage.chain.reader``), which gives the mirror's lag in
blocks without walking the chain."""

from __future__ import annotations

from odfd.sync.errors import CorruptSourceError, RemoteNotFoundError
from odfd.sync.transport.base import RemoteView, SourceHead
from storage.chain.reader import ChainBlock, HashMismatch, MalformedBlock, check_block


async def read_head(
    view: RemoteView, where: str, known: SourceHead | None, cid: str | None = None
) -> SourceHead:
    """``view``'s head (``known``: what the previous check saw; ``cid``: what an ``ipns://``
    name resolved to)."""
    head = await view.head()
    if head is None:
        raise RemoteNotFoundError(f"{where}: no dataset there (refs/head is missing)")
    if known is not None and known.head == head and known.sequence_number is not None:
        return SourceHead(head, known.sequence_number, cid)
    checked = check_block(head, await view.block(head))
    if isinstance(checked, HashMismatch):
        raise CorruptSourceError(f"{where}: head block {head} does not hash to its name")
    if isinstance(checked, MalformedBlock):
        raise CorruptSourceError(f"{where}: head block {head} does not decode: {checked.reason}")
    assert isinstance(checked, ChainBlock)  # one block alone has no link to break
    return SourceHead(head, checked.block.sequence_number, cid)
