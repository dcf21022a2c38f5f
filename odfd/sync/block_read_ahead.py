"""Reading a listable remote's blocks ahead of the walk.

The walk (``odfd.sync.walk``) can only ask for one block at a time: each block names the one
before it. Over S3 that makes a chain of n blocks n GETs in series, each waiting for the last
(3.3 s for a 2,004-block chain in a loopback SeaweedFS; 0.9 s read ahead). A bucket lists its
block keys, though, so the read-ahead lists them once (paged), leaves out those the local
dataset already holds, and GETs the rest many at once; the walk then mostly finds the block it
asks for already here, or on its way.

It only moves bytes: the walk still checks every block's hash, link and sequence number as it does
without it, and a key the walk never asks for (an unreachable block, junk) is dropped when the walk
ends, never stored. A block the walk asks for before it was read ahead is fetched directly (awaited
if its GET is already running: never fetched twice); a failed read-ahead is retried by the walk's
own fetch, so its error, if any, is reported as without read-ahead, and the errors of blocks never
asked for are nobody's. The listing starts once the walk has asked for ``start_after`` blocks, so a
short walk costs what it did, or as soon as the head block arrives if its sequence number puts more
than ``start_after`` blocks above the local head: a long walk's first GETs one after another are
slowed by the pull's downloads running beside them (a 500 MB S3 pull's 34-block metadata phase took
0.94 s, 0.14 s listed at once). That number is read before the walk checks the head: a remote lying
about it can only make the walk list. Memory is bounded: ``in_flight`` GETs and about
``max_bytes`` of fetched-but-not-taken blocks (listing pauses until the walk takes some).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from types import TracebackType

from protocol.codec.flatbuffers import peek_transfer_facts
from protocol.errors import DecodeError
from protocol.identity import Multihash

IN_FLIGHT = 48
"""GETs running at once (enough to hide the round trip on a local or a far endpoint)."""
MAX_BYTES = 64 << 20
"""Fetched blocks held for the walk before the read-ahead waits for it to take some."""
START_AFTER = 16
"""Blocks the walk fetches itself before the listing starts: an incremental pull of a few
blocks never lists the whole chain (~40 ms for 1,000 keys)."""


class BlockReadAhead:
    """Use as ``async with BlockReadAhead(...) as ahead`` and walk with ``ahead.get``: leaving
    the block cancels every GET still running."""

    def __init__(
        self,
        listing: Callable[[], AsyncIterator[Multihash]],
        fetch: Callable[[Multihash], Awaitable[bytes]],
        held_locally: Callable[[Multihash], Awaitable[bool]],
        *,
        in_flight: int = IN_FLIGHT,
        max_bytes: int = MAX_BYTES,
        start_after: int = START_AFTER,
        local_sequence: int | None = None,
    ) -> None:
        """``local_sequence``: the local head's sequence number (-1 for no local chain), to
        list at once for a long walk; ``None``: unknown (the count of blocks asked decides)."""
        self._listing = listing
        self._fetch = fetch
        self._held_locally = held_locally
        self._slots = asyncio.Semaphore(in_flight)
        self._max_bytes = max_bytes
        self._start_after = start_after
        self._local_sequence = local_sequence
        self._held_bytes = 0
        self._room = asyncio.Condition()
        self._ahead: dict[Multihash, asyncio.Task[bytes]] = {}
        self._asked: set[Multihash] = set()
        self._lister: asyncio.Task[None] | None = None
        self.read_ahead = 0
        """How many GETs the read-ahead started (tests count them)."""

    async def __aenter__(self) -> BlockReadAhead:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tasks = [*self._ahead.values(), *([self._lister] if self._lister else [])]
        self._ahead.clear()
        for task in tasks:
            task.cancel()
        # Their errors are not the walk's: only what it asked for counts, and that it has.
        await asyncio.gather(*tasks, return_exceptions=True)

    async def get(self, hash: Multihash) -> bytes:
        """The block's bytes as the remote serves them (the walk verifies them)."""
        self._asked.add(hash)
        if self._lister is None and len(self._asked) > self._start_after:
            self._lister = asyncio.create_task(self._list())
        task = self._ahead.pop(hash, None)
        if task is not None:
            with contextlib.suppress(Exception):
                data = await task
                await self._taken(len(data))
                return data
        data = await self._fetch(hash)
        if self._lister is None and len(self._asked) == 1 and self._long_walk(data):
            self._lister = asyncio.create_task(self._list())
        return data

    def _long_walk(self, head: bytes) -> bool:
        """Whether the head's (unchecked) sequence number puts more than ``start_after`` blocks
        above the local head."""
        if self._local_sequence is None:
            return False
        try:
            sequence_number = peek_transfer_facts(head).sequence_number
        except DecodeError:
            return False  # the walk reports it
        return sequence_number - self._local_sequence > self._start_after

    async def _taken(self, size: int) -> None:
        async with self._room:
            self._held_bytes -= size
            self._room.notify()

    async def _list(self) -> None:
        """Start a GET for each listed block the walk may need; a listing that fails (its error
        is dropped on leaving) leaves the walk fetching every block itself."""
        hashes = self._listing()
        try:
            async for hash in hashes:
                if hash in self._asked or await self._held_locally(hash):
                    continue
                async with self._room:
                    await self._room.wait_for(lambda: self._held_bytes < self._max_bytes)
                await self._slots.acquire()
                if hash in self._asked:  # the walk got there first, while this waited
                    self._slots.release()
                    continue
                self._ahead[hash] = asyncio.create_task(self._read(hash))
                self.read_ahead += 1
        finally:
            if isinstance(hashes, AsyncGenerator):
                await hashes.aclose()

    async def _read(self, hash: Multihash) -> bytes:
        try:
            data = await self._fetch(hash)
        finally:
            self._slots.release()
        self._held_bytes += len(data)  # counted here, before anyone can take it
        return data
