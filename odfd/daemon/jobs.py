"""Timed jobs with bounded concurrency and no polling.

Each key (a mirror name, a dataset id) has at most one timer, set with ``loop.call_at`` (asyncio
keeps those in a heap, so 1,000 idle mirrors cost nothing until one is due). A due key goes into
a FIFO queue served by ``limit`` worker tasks; a key already queued or running is not queued
twice. ``close`` stops taking work, lets running jobs finish within a grace period, then cancels
them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Hashable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

Job = Callable[[Hashable], Coroutine[Any, Any, None]]


class JobRunner:
    def __init__(
        self, name: str, job: Job, limit: int, on_change: Callable[[int, int], None] | None = None
    ) -> None:
        """``on_change(queued, running)`` is called whenever either count changes (metrics)."""
        self.name = name
        self._job = job
        self._limit = limit
        self._on_change = on_change
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._due_at: dict[Hashable, datetime] = {}
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._queued: set[Hashable] = set()
        self._running: dict[Hashable, asyncio.Task[None]] = {}
        self._rerun: set[Hashable] = set()
        self._workers: list[asyncio.Task[None]] = []
        self._closing = False
        self.peak_running = 0

    def start(self) -> None:
        self._workers = [
            asyncio.create_task(self._work(), name=f"{self.name}-worker-{i}")
            for i in range(self._limit)
        ]

    # --- scheduling -----------------------------------------------------------------------------

    def schedule_at(self, key: Hashable, when: datetime) -> None:
        """Run ``key`` at ``when`` (wall clock); replaces its earlier timer."""
        if self._closing:
            return
        self.cancel(key)
        loop = asyncio.get_running_loop()
        delay = (when - datetime.now(UTC)).total_seconds()
        self._due_at[key] = when
        self._timers[key] = loop.call_at(loop.time() + max(delay, 0.0), self._fire, key)

    def run_now(self, key: Hashable) -> None:
        """Queue ``key`` now; if it is running, run it once more when it finishes."""
        self.cancel(key)
        if key in self._running and not self._closing:
            self._rerun.add(key)
        self._enqueue(key)

    def cancel(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        self._due_at.pop(key, None)
        if timer is not None:
            timer.cancel()

    def due_at(self, key: Hashable) -> datetime | None:
        return self._due_at.get(key)

    def scheduled(self) -> dict[Hashable, datetime]:
        """Every key with a timer, and when it is due."""
        return dict(self._due_at)

    def is_busy(self, key: Hashable) -> bool:
        return key in self._queued or key in self._running

    @property
    def queued(self) -> int:
        return len(self._queued)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def timers(self) -> int:
        return len(self._timers)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self._due_at.pop(key, None)
        self._enqueue(key)

    def _enqueue(self, key: Hashable) -> None:
        if self._closing or key in self._queued or key in self._running:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(len(self._queued), len(self._running))

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            if self._closing:
                continue
            task = asyncio.create_task(self._job(key), name=f"{self.name}:{key}")
            self._running[key] = task
            self.peak_running = max(self.peak_running, len(self._running))
            self._changed()
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.done():
                    raise  # the worker itself is being stopped; close() deals with the job
                if not self._closing:
                    log.warning("job cancelled", extra={"runner": self.name, "key": str(key)})
            except Exception:
                log.exception("job failed", extra={"runner": self.name, "key": str(key)})
            finally:
                if task.done():
                    self._running.pop(key, None)
                    self._changed()
                    if key in self._rerun:
                        self._rerun.discard(key)
                        self._enqueue(key)

    # --- stopping -------------------------------------------------------------------------------

    async def close(self, grace: float) -> list[Hashable]:
        """Stop scheduling, wait up to ``grace`` seconds for running jobs, cancel the rest;
        returns the keys that had to be cancelled."""
        self._closing = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._due_at.clear()
        self._queued.clear()
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        running = dict(self._running)
        cancelled: list[Hashable] = []
        if running:
            pending = set(running.values())
            if grace > 0:
                _, pending = await asyncio.wait(pending, timeout=grace)
            cancelled = [key for key, task in running.items() if task in pending]
            for task in pending:
                task.cancel()
            await asyncio.gather(*running.values(), return_exceptions=True)
        self._running.clear()
        self._changed()
        return cancelled
