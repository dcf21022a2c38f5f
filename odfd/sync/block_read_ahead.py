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
short walk costs what it did. Memory is bounded: ``in_flight`` GETs and about ``max_bytes`` of
fetched-but-not-taken blocks (listing pauses until the walk takes some).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from types import TracebackType

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
    ) -> None:
        self._listing = listing
        self._fetch = fetch
        self._held_locally = held_locally
        self._slots = asyncio.Semaphore(in_flight)
        self._max_bytes = max_bytes
        self._start_after = start_after
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
        return await self._fetch(hash)

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
