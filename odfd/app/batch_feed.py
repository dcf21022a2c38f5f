"""Record batches handed from the event loop, where the engine's stream yields them, to a
worker thread that renders them as they come: rendering a large answer overlaps its execution,
and at most ``size`` batches wait between the two (the engine waits when rendering lags)."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterator

import pyarrow as pa


class FeedStopped(Exception):
    """The feed was stopped while a thread waited on it (the answer was abandoned)."""


class BatchFeed:
    """Filled on the event loop (:meth:`put`, then :meth:`end` or :meth:`fail`); iterated in one
    worker thread, which waits for each batch (:meth:`stop` ends the wait)."""

    def __init__(self, size: int = 4) -> None:
        self._loop = asyncio.get_running_loop()
        self._size = size
        self._items: deque[pa.RecordBatch] = deque()
        self._ended = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._room = asyncio.Event()

    async def put(self, batch: pa.RecordBatch) -> None:
        """Waits (on the loop) while ``size`` batches are already waiting."""
        while True:
            with self._changed:
                if len(self._items) < self._size:
                    self._items.append(batch)
                    self._changed.notify()
                    return
                self._room.clear()
            await self._room.wait()

    def end(self) -> None:
        self._finish(None)

    def fail(self, error: BaseException) -> None:
        """The thread raises ``error`` once it has taken the batches before it."""
        self._finish(error)

    def stop(self) -> None:
        """Nothing more comes: a waiting thread raises ``FeedStopped``."""
        self._finish(FeedStopped())

    def _finish(self, error: BaseException | None) -> None:
        with self._changed:
            if not self._ended:
                self._ended, self._error = True, error
            self._changed.notify()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        """Blocking: in the worker thread only."""
        while True:
            with self._changed:
                while not self._items and not self._ended:
                    self._changed.wait()
                if self._items and not isinstance(self._error, FeedStopped):
                    batch = self._items.popleft()
                elif self._error is not None:
                    raise self._error
                else:
                    return
            self._loop.call_soon_threadsafe(self._room.set)
            yield batch
