"""Cancelling the engine work of an asyncio task that gets cancelled.

Engine work runs in worker threads (``asyncio.to_thread``), which a cancelled task cannot stop:
the thread would keep its engine job running to the end. So a task that starts engine work opens
``cancellable_jobs()``; ``to_thread`` copies the task's context into the thread, where the engine
joins the work it starts to the task's :class:`CancelScope` and says how to cancel it (Spark:
``verifier.engine.spark.cancel.jobs_of_task``). When the task is cancelled, the scope cancels that
work before the cancellation goes on, and the thread's engine call fails at once.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar


class CancelScope:
    """The engine work of one task: what to call to cancel each piece still running."""

    def __init__(self, name: str) -> None:
        self.name = name
        """Unique; engines name their job groups or tags after it."""
        self._cancels: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def on_cancel(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Calls ``cancel`` if the task is cancelled; returns what forgets it (the work ended)."""
        with self._lock:
            key = next(self._ids)
            self._cancels[key] = cancel

        def forget() -> None:
            with self._lock:
                self._cancels.pop(key, None)

        return forget

    def cancel(self) -> None:
        """Cancels the work still running (blocking: call from a thread)."""
        with self._lock:
            cancels = list(self._cancels.values())
        for cancel in cancels:
            cancel()


_SCOPE: ContextVar[CancelScope | None] = ContextVar("odfd_engine_cancel_scope", default=None)


def current_scope() -> CancelScope | None:
    """The scope of the task this code runs for (its worker threads included), if it has one."""
    return _SCOPE.get()


@asynccontextmanager
async def cancellable_jobs(what: str) -> AsyncIterator[str]:
    """Engine work started inside the block (from threads it starts) forms one scope, named after
    ``what``; cancelling the block cancels it. Yields the scope's name."""
    scope = CancelScope(f"odfd-{what}-{uuid.uuid4().hex[:12]}")
    token = _SCOPE.set(scope)
    try:
        yield scope.name
    except asyncio.CancelledError:
        await asyncio.shield(asyncio.to_thread(scope.cancel))
        raise
    finally:
        _SCOPE.reset(token)
