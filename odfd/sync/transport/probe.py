"""What the transports share beyond their ``open``: the probe and the refusal of a push.

The probe is the cheap "has the head changed?" check a mirror makes before pulling: read
``refs/head`` (one small request); only when it is new, fetch its block (one more), check it
against its hash and decode it for its sequence number (``storage.chain.reader``), which gives the
mirror's lag in blocks without walking the chain. Every transport probes the view its ``open``
gives (``probe_view``); one that cannot be written refuses a push with its reason
(``refuse_push``)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import NoReturn

from odfd.sync.errors import CorruptSourceError, RemoteNotFoundError, UnsupportedUrlError
from odfd.sync.transport.base import RemoteView, SourceHead
from storage.chain.reader import ChainBlock, HashMismatch, MalformedBlock, check_block


async def probe_view(
    opened: AbstractAsyncContextManager[RemoteView],
    where: str,
    known: SourceHead | None,
    cid: str | None = None,
) -> SourceHead:
    """The head of the remote ``opened`` gives (``Transport.probe``), read as ``read_head``
    reads it."""
    async with opened as view:
        return await read_head(view, where, known, cid)


def refuse_push(url: str, why: str) -> NoReturn:
    """``Transport.push`` of a remote that cannot be written."""
    raise UnsupportedUrlError(f"{url}: {why}")


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
