"""Timed jobs with bounded concurrency and no polling.

Each key (a mirror name, a dataset id) has at most one timer, set with ``loop.call_at`` (asyncio
keeps those in a heap, so 10,000 idle mirrors cost nothing until one is due). A due key waits in
the ready queue of its group (``group_of``: for mirrors, the peer it syncs from) until it may run:
at most ``limit`` jobs run at once in all, at most ``group_limit`` of one group, and the groups take
turns, so a burst of due keys on one peer neither exceeds that peer's share nor holds up the others.
A key already queued or running is not queued twice. ``close`` stops taking work, lets running jobs
finish within a grace period, then cancels them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Hashable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

Job = Callable[[Hashable], Coroutine[Any, Any, None]]


def _one_group(key: Hashable) -> Hashable:
    return None


class JobRunner:
    def __init__(
        self,
        name: str,
        job: Job,
        limit: int,
        on_change: Callable[[int, int], None] | None = None,
        *,
        group_of: Callable[[Hashable], Hashable] = _one_group,
        group_limit: int = 0,
    ) -> None:
        """``on_change(queued, running)`` is called whenever either count changes (metrics);
        ``group_limit`` 0 means a group may use all ``limit`` slots."""
        self.name = name
        self._job = job
        self._limit = limit
        self._on_change = on_change
        self._group_of = group_of
        self._group_limit = group_limit or limit
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._due_at: dict[Hashable, datetime] = {}
        self._ready: dict[Hashable, deque[Hashable]] = {}
        """Group -> its queued keys, oldest first; the dict's order is the groups' turn order."""
        self._queued: dict[Hashable, Hashable] = {}
        """Queued key -> its group."""
        self._running: dict[Hashable, asyncio.Task[None]] = {}
        self._running_in: dict[Hashable, int] = {}
        self._rerun: set[Hashable] = set()
        self._started = False
        self._dispatch_pending = False
        self._closing = False
        self.peak_running = 0

    def start(self) -> None:
        self._started = True
        self._dispatch()

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
        group = self._group_of(key)
        self._queued[key] = group
        self._ready.setdefault(group, deque()).append(key)
        self._dispatch_soon()
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(len(self._queued), len(self._running))

    # --- running --------------------------------------------------------------------------------

    def _dispatch_soon(self) -> None:
        """Dispatch on the loop's next turn, once however many keys arrive before it (a key
        queued twice in one turn, or queued while it starts, is still one run)."""
        if not self._dispatch_pending:
            self._dispatch_pending = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        """Start queued jobs while slots are free, one per group in turn. A full group keeps its
        turn; it is skipped, so the scan is over groups with queued keys, not over keys."""
        self._dispatch_pending = False
        if not self._started or self._closing:
            return
        while len(self._running) < self._limit and self._ready:
            for group in list(self._ready):
                if self._running_in.get(group, 0) < self._group_limit:
                    break
            else:
                return  # every group with queued keys is at its limit
            keys = self._ready.pop(group)
            key = keys.popleft()
            if keys:
                self._ready[group] = keys  # to the back of the turn order
            del self._queued[key]
            self._start(key, group)

    def _start(self, key: Hashable, group: Hashable) -> None:
        task = asyncio.create_task(self._job(key), name=f"{self.name}:{key}")
        self._running[key] = task
        self._running_in[group] = self._running_in.get(group, 0) + 1
        self.peak_running = max(self.peak_running, len(self._running))
        task.add_done_callback(lambda done: self._finished(key, group, done))

    def _finished(self, key: Hashable, group: Hashable, task: asyncio.Task[None]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
            left = self._running_in.pop(group) - 1
            if left:
                self._running_in[group] = left
        if task.cancelled():
            if not self._closing:
                log.warning("job cancelled", extra={"runner": self.name, "key": str(key)})
        elif task.exception() is not None:
            err = task.exception()
            log.error(
                "job failed",
                extra={"runner": self.name, "key": str(key)},
                exc_info=(type(err), err, err.__traceback__) if err is not None else None,
            )
        if key in self._rerun:
            self._rerun.discard(key)
            self._enqueue(key)
        self._dispatch_soon()
        self._changed()

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
        self._ready.clear()
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
        self._running_in.clear()
        self._changed()
        return cancelled
