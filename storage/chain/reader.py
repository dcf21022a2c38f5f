"""The one verified way to read a metadata chain: its blocks, each checked, or the fault that
stops the read.

Every walk of a chain reads through here, so every walk makes the same checks: the chain's own
reads and its validation, ``odfd log``'s read of a folder, a pull's walk of a remote, the
verifier's metadata layer and a mirror's head probe. A block is accepted only if its bytes hash to
the name it was asked for and decode, and, walking back, only if it is the block its child names
with a sequence number that fits below the child's. What breaks a check is yielded as a typed
``ChainFault`` rather than raised, and ends the read: each caller turns it into its own report (a
chain rule error, a verifier finding, a corrupt source) with everything the fault records.

How strictly sequence numbers must fit depends on who wrote the chain. A remote is trusted for
nothing (``strict``): numbers drop by exactly one, down to a ``Seed`` at #0, and only block #0 has
no ``prevBlockHash``. A local chain was checked by the rules when it was written, and its rules
pass reports a gap precisely: there numbers only have to decrease, which bounds any walk.

``BackwardCheck`` makes the checks and does no I/O; the readers below are thin loops around it,
async over any ``BlockSource`` (every object store is one) and sync over a folder.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Container, Iterable, Iterator
from pathlib import Path
from typing import Protocol

from protocol.codec.flatbuffers import block_hash, decode_block, is_block_hash, peek_prev_block_hash
from protocol.errors import DecodeError
from protocol.frozen import frozen_dataclass
from protocol.identity import Multihash
from protocol.model import MetadataBlock
from storage.errors import ObjectNotFoundError
from storage.layout import object_name

FORWARD_SEGMENT = 1024
"""Blocks ``read_forward`` holds in memory at once."""


class BlockSource(Protocol):
    """Where blocks are read from by hash: any object store, or a remote's block fetcher."""

    async def get_bytes(self, hash: Multihash) -> bytes:
        """The stored bytes; ``ObjectNotFoundError`` if there are none under ``hash``."""
        ...


@frozen_dataclass
class BlockPosition:
    hash: Multihash
    sequence_number: int | None
    """``None`` when only the block's link was read (``read_forward``'s first pass)."""


@frozen_dataclass
class ChainBlock:
    """A block that passed every check, with the bytes it was stored as."""

    hash: Multihash
    block: MetadataBlock
    data: bytes

    @property
    def position(self) -> BlockPosition:
        return BlockPosition(self.hash, self.block.sequence_number)


@frozen_dataclass
class ChainFault:
    """Why a read stopped at block ``hash``."""

    hash: Multihash
    child: BlockPosition | None
    """The block whose ``prevBlockHash`` named this one; ``None`` for the block the read began at."""


@frozen_dataclass
class MissingBlock(ChainFault):
    store: str
    """Where it was looked for."""


@frozen_dataclass
class HashMismatch(ChainFault):
    actual: Multihash
    """What the stored bytes hash to."""
    size: int
    """How many bytes are stored."""


@frozen_dataclass
class MalformedBlock(ChainFault):
    reason: str
    """The decoder's message."""


@frozen_dataclass
class BrokenLink(ChainFault):
    """Blocks in hand (``check_run``) out of link order: the child's ``prevBlockHash`` names
    ``named``, but the next block given is ``hash``."""

    named: Multihash | None


@frozen_dataclass
class BrokenSequence(ChainFault):
    """The block's sequence number does not fit its place: not below its child's (strict: not
    exactly one below), or (strict) #0 with a ``prevBlockHash`` or another number without one.
    With ``counted_from`` the number was not read but counted down from that head: the block
    must be #0, yet it links on to ``prev_block_hash`` (a cycle of misnamed files, or a corrupt
    block)."""

    sequence_number: int
    prev_block_hash: Multihash | None
    counted_from: BlockPosition | None = None


ChainItem = ChainBlock | ChainFault

_new = object.__new__
_set_hash = inspect.getattr_static(ChainBlock, "hash").__set__
_set_block = inspect.getattr_static(ChainBlock, "block").__set__
_set_data = inspect.getattr_static(ChainBlock, "data").__set__
"""``check`` builds every ``ChainBlock`` through its slots, as the block decoder builds blocks: the
generic frozen ``__init__`` cost a 10,000-block walk ~0.03 s."""


class BackwardCheck:
    """Checks the blocks of a chain met newest first, one at a time; remembers the last one
    accepted, whose ``prevBlockHash`` names the next block to check."""

    __slots__ = ("_hash", "_named", "_number", "hashed", "strict")

    def __init__(
        self, *, strict: bool = False, after: ChainBlock | None = None, hashed: bool = False
    ) -> None:
        """``after``: a block already accepted, the child of the first block to check.
        ``hashed``: every block's bytes were already found to hash to its name (a metadata
        tarball's members are), so that check is not paid twice."""
        self.strict = strict
        self.hashed = hashed
        self._hash: Multihash | None = None
        self._number = 0
        self._named: Multihash | None = None
        if after is not None:
            self._accept(after.hash, after.block)

    @property
    def child(self) -> BlockPosition | None:
        """The last block accepted."""
        return None if self._hash is None else BlockPosition(self._hash, self._number)

    def missing(self, hash: Multihash, store: str) -> MissingBlock:
        return MissingBlock(hash, self.child, store)

    def check(self, hash: Multihash, data: bytes) -> ChainItem:
        """The block stored as ``data`` under ``hash``, or what is wrong with it."""
        if not self.hashed and (mismatch := check_hash(hash, data, self.child)) is not None:
            return mismatch
        try:
            block = decode_block(data)
        except DecodeError as err:
            return MalformedBlock(hash, self.child, str(err))
        has_child = self._hash is not None
        if has_child and hash != self._named:
            return BrokenLink(hash, self.child, self._named)
        number = block.sequence_number
        if self.strict:
            fits = (not has_child or number == self._number - 1) and (number == 0) == (
                block.prev_block_hash is None
            )
        else:
            fits = not has_child or number < self._number
        if not fits:
            return BrokenSequence(hash, self.child, number, block.prev_block_hash)
        self._accept(hash, block)
        item = _new(ChainBlock)
        _set_hash(item, hash)
        _set_block(item, block)
        _set_data(item, data)
        return item

    def _accept(self, hash: Multihash, block: MetadataBlock) -> None:
        self._hash, self._number, self._named = hash, block.sequence_number, block.prev_block_hash


def check_hash(
    hash: Multihash, data: bytes, child: BlockPosition | None = None
) -> HashMismatch | None:
    """Whether the stored ``data`` hash to ``hash``, its name (the first check of every block,
    and the only one of a block the caller already decoded from the bytes it verified)."""
    if is_block_hash(hash, data):
        return None
    return HashMismatch(hash, child, block_hash(data), len(data))


def check_block(hash: Multihash, data: bytes) -> ChainItem:
    """One block on its own (a head just fetched): its hash and its decoding."""
    return BackwardCheck().check(hash, data)


def check_run(
    blocks: Iterable[tuple[Multihash, bytes]],
    *,
    strict: bool = False,
    after: ChainBlock | None = None,
    hashed: bool = False,
) -> Iterator[ChainItem]:
    """Blocks in hand, newest first, each of which must be the one the block before it (or,
    first, ``after``) names. ``hashed``: as for ``BackwardCheck``."""
    check = BackwardCheck(strict=strict, after=after, hashed=hashed)
    for hash, data in blocks:
        item = check.check(hash, data)
        yield item
        if isinstance(item, ChainFault):
            return


async def read_back(
    source: BlockSource,
    start: Multihash | None,
    *,
    stop_at: Multihash | None = None,
    strict: bool = False,
) -> AsyncGenerator[ChainItem, None]:
    """Blocks newest first from ``start`` down to the ``Seed`` or, if it comes first, to
    (excluding) ``stop_at``. Each is read only when the previous one was taken."""
    check = BackwardCheck(strict=strict)
    hash = start
    while hash is not None and hash != stop_at:
        try:
            data = await source.get_bytes(hash)
        except ObjectNotFoundError as err:
            yield check.missing(hash, err.store)
            return
        item = check.check(hash, data)
        yield item
        if isinstance(item, ChainFault):
            return
        hash = item.block.prev_block_hash


async def read_back_list(
    source: BlockSource, start: Multihash, stop_at: Multihash | None
) -> list[ChainBlock] | ChainFault:
    """``read_back`` of a bounded stretch as one list, without an async-generator step per block
    (``read_forward`` reads whole chains this way)."""
    check = BackwardCheck()
    blocks: list[ChainBlock] = []
    hash: Multihash | None = start
    while hash is not None and hash != stop_at:
        try:
            data = await source.get_bytes(hash)
        except ObjectNotFoundError as err:
            return check.missing(hash, err.store)
        item = check.check(hash, data)
        if isinstance(item, ChainFault):
            return item
        blocks.append(item)
        hash = item.block.prev_block_hash
    return blocks


def read_back_from_folder(
    blocks_dir: Path, start: Multihash | None, *, strict: bool = False
) -> Iterator[ChainItem]:
    """``read_back`` of a dataset's ``blocks/`` folder on this machine, without an event loop
    (``odfd log`` starts in half the time)."""
    check = BackwardCheck(strict=strict)
    hash = start
    while hash is not None:
        try:
            data = (blocks_dir / object_name(hash)).read_bytes()
        except FileNotFoundError:
            yield check.missing(hash, str(blocks_dir))
            return
        item = check.check(hash, data)
        yield item
        if isinstance(item, ChainFault):
            return
        hash = item.block.prev_block_hash


async def read_forward(
    source: BlockSource,
    head: Multihash | None,
    *,
    after: Container[Multihash] = (),
    segment: int = FORWARD_SEGMENT,
) -> AsyncGenerator[ChainItem, None]:
    """Blocks oldest first up to ``head``: from the ``Seed``, or from the block after the newest
    ancestor of ``head`` that is in ``after``.

    Memory stays bounded however long the chain is: a first pass back reads only each block's
    link and keeps every ``segment``-th hash; then each segment is read back again, checked, and
    yielded forward. Up to ``segment`` blocks are read once. The first pass takes at most as many
    steps as the head's sequence number says there are blocks: links that go on past that end in
    ``BrokenSequence`` with ``counted_from`` set. A fault in the first pass comes before any block.
    """
    if head is None or head in after:
        return
    anchors: list[Multihash] = []
    recent: list[tuple[Multihash, bytes]] = []
    count = 0
    hash: Multihash | None = head
    child: Multihash | None = None
    """The last block read, which links to ``hash`` (its number is not read)."""
    newest: ChainBlock | None = None
    while hash is not None and hash not in after:
        if newest is not None and count > newest.block.sequence_number:
            assert child is not None  # set with newest
            yield BrokenSequence(child, None, 0, hash, newest.position)
            return
        try:
            data = await source.get_bytes(hash)
        except ObjectNotFoundError as err:
            yield MissingBlock(hash, _unnumbered(child), err.store)
            return
        if newest is None:
            first = check_block(hash, data)
            if isinstance(first, ChainFault):
                yield first
                return
            newest = first
        if count % segment == 0:
            anchors.append(hash)
        if count < segment:
            recent.append((hash, data))
        count += 1
        try:
            link = peek_prev_block_hash(data)
        except DecodeError as err:
            yield MalformedBlock(hash, _unnumbered(child), str(err))
            return
        child, hash = hash, link
    base = hash
    if count <= segment:
        assert newest is not None  # head is not in after, so it was read
        checked = [newest]
        for item in check_run(recent[1:], after=newest):
            if isinstance(item, ChainFault):
                yield item
                return
            checked.append(item)
        for item in reversed(checked):
            yield item
        return
    recent.clear()
    for i in range(len(anchors) - 1, -1, -1):
        stop = anchors[i + 1] if i + 1 < len(anchors) else base
        stretch = await read_back_list(source, anchors[i], stop)
        if isinstance(stretch, ChainFault):
            yield stretch
            return
        for item in reversed(stretch):
            yield item


def _unnumbered(hash: Multihash | None) -> BlockPosition | None:
    return None if hash is None else BlockPosition(hash, None)
