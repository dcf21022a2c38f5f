"""A query's result handed from the node's event loop, where the engine runs, to the gRPC thread
that sends it.

One coroutine on the loop opens the query and puts its batches here as the engine produces
them; the gRPC thread takes them. Asking the loop for each batch instead (a coroutine per batch,
and one more to close the query) cost every query several trips between the threads, each a
wake-up of the loop and of the waiting thread: more CPU than a small query's engine work. Here a
batch costs one wake-up of the sending thread, and the producer waits only when ``depth``
batches are already waiting, so the server holds at most ``depth`` batches besides the one
being sent and the one being computed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Pending:
    """:meth:`Channel.take` found nothing yet."""


PENDING = Pending()


class Channel(Generic[T]):
    """Items from a coroutine on ``loop`` to one thread, ending with an error or a last item the
    consumer recognises (the producer stops putting)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, depth: int = 2) -> None:
        self._loop = loop
        self._depth = depth
        self._ready = threading.Condition()
        self._items: deque[T] = deque()
        self._error: BaseException | None = None
        self._space: asyncio.Future[None] | None = None
        """What the producer awaits while the channel is full."""

    async def space(self) -> None:
        """Returns once fewer than ``depth`` items wait (on the loop)."""
        with self._ready:
            if len(self._items) < self._depth:
                return
            waiter = self._space = self._loop.create_future()
        await waiter

    def put(self, item: T) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()

    def fail(self, error: BaseException) -> None:
        """Ends the channel with ``error``, raised by :meth:`take` once the items before it
        are taken."""
        with self._ready:
            self._error = error
            self._ready.notify()

    def take(self, timeout: float) -> T | Pending:
        """The next item, waiting at most ``timeout`` seconds for it (:data:`PENDING` then);
        raises the producer's error after its last item."""
        with self._ready:
            if not self._items and self._error is None:
                self._ready.wait(timeout)
            if not self._items:
                if self._error is not None:
                    raise self._error
                return PENDING
            item = self._items.popleft()
            waiter, self._space = self._space, None
        if waiter is not None:
            self._loop.call_soon_threadsafe(_wake, waiter)
        return item


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
