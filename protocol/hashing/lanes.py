"""Ordered lanes of work on a shared thread pool: how one file's hashes use several cores.

Each leaf column's hasher must see its records in row order, but different columns (and the
physical hash) are independent. A lane runs its tasks one after another, in the order they were
submitted; lanes run side by side on the pool's threads. A lane with work waiting submits one task
at a time to the pool, so many lanes (of several files) share the threads fairly. SHA3 over a
buffer larger than 2 KiB, Arrow kernels and NumPy's array operations release the GIL, so threads
are enough for this work to use every core.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor

Task = Callable[[], None]


def available_cores() -> int:
    """The cores this process may run on: how many threads hashing keeps busy by default."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Lanes:
    """``count`` lanes over ``executor``, holding at most ``max_pending`` unfinished tasks.

    ``submit`` blocks while that many are pending, which bounds the memory the waiting tasks
    hold (each keeps a batch's column alive); so it must not be called from a thread of
    ``executor`` itself. The first error a task raises is re-raised by ``wait``, and the tasks
    after it are skipped.
    """

    def __init__(self, executor: Executor, count: int, max_pending: int) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self._executor = executor
        self._queues: list[deque[Task]] = [deque() for _ in range(count)]
        self._busy = [False] * count
        self._max_pending = max_pending
        self._pending = 0
        self._error: BaseException | None = None
        self._changed = threading.Condition()

    def submit(self, lane: int, task: Task) -> None:
        """Queues ``task`` behind the earlier tasks of ``lane``."""
        with self._changed:
            while self._pending >= self._max_pending:
                self._changed.wait()
            self._pending += 1
            self._queues[lane].append(task)
            if self._busy[lane]:
                return
            self._busy[lane] = True
        self._schedule(lane)

    def _schedule(self, lane: int) -> None:
        try:
            self._executor.submit(self._run_next, lane)
        except RuntimeError as error:  # the pool was shut down: nothing queued will run
            with self._changed:
                self._error = self._error or error
                self._pending -= len(self._queues[lane])
                self._queues[lane].clear()
                self._busy[lane] = False
                self._changed.notify_all()

    def _run_next(self, lane: int) -> None:
        with self._changed:
            task = self._queues[lane].popleft()
            failed = self._error is not None
        try:
            if not failed:
                task()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread by wait()
            with self._changed:
                if self._error is None:
                    self._error = error
        finally:
            with self._changed:
                self._pending -= 1
                more = bool(self._queues[lane])
                self._busy[lane] = more
                self._changed.notify_all()
        if more:
            self._schedule(lane)

    def wait(self) -> None:
        """Blocks until every submitted task has run; re-raises the first error of one."""
        with self._changed:
            while self._pending:
                self._changed.wait()
            error = self._error
        if error is not None:
            raise error
