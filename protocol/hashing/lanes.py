"""Ordered lanes of work on a shared thread pool: how one file's hashes use several cores.

Each leaf column's hasher must see its records in row order, but different columns (and the
physical hash) are independent. A lane runs its tasks one after another, in the order they were
submitted; lanes run side by side on the pool's threads. A lane with work waiting submits one task
at a time to the pool, so many lanes (of several files) share the threads fairly. A task may come
with a preparation (building a block's records) that needs no order: it starts on the pool at
once, so a column's next blocks are encoded while its hasher takes the earlier ones, and only the
SHA3 of one column is a chain of steps that must run one after another. SHA3 over a buffer larger
than 2 KiB, Arrow kernels and NumPy's array operations release the GIL, so threads are enough for
this work to use every core.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

Task = Callable[[], None]
Prepared = TypeVar("Prepared")


@dataclass(frozen=True, slots=True)
class _Entry:
    """A lane's task and the preparation it waits for (``None``: none)."""

    task: Task
    ready: Future[Any] | None


def available_cores() -> int:
    """The cores this process may run on: how many threads hashing keeps busy by default."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Lanes:
    """``count`` lanes over ``executor``, holding at most ``max_pending`` unfinished tasks.

    ``submit`` and ``submit_prepared`` block while that many are pending, which bounds the memory
    the waiting tasks hold (each keeps a batch's column, or its records, alive); so they must not
    be called from a thread of ``executor`` itself. The first error a task raises is re-raised by ``wait``, and the tasks
    after it are skipped.
    """

    def __init__(self, executor: Executor, count: int, max_pending: int) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self._executor = executor
        self._queues: list[deque[_Entry]] = [deque() for _ in range(count)]
        self._busy = [False] * count
        self._max_pending = max_pending
        self._pending = 0
        self._error: BaseException | None = None
        self._changed = threading.Condition()

    def submit(self, lane: int, task: Task) -> None:
        """Queues ``task`` behind the earlier tasks of ``lane``."""
        self._reserve()
        self._enqueue(lane, _Entry(task, None))

    def submit_prepared(
        self, lane: int, prepare: Callable[[], Prepared], use: Callable[[Prepared], None]
    ) -> None:
        """Starts ``prepare`` on the executor now, side by side with any other work, and queues
        ``use`` of its result behind the earlier tasks of ``lane`` (an error of ``prepare`` is
        the error of that task)."""
        self._reserve()
        try:
            ready = self._executor.submit(prepare)
        except RuntimeError as error:  # the pool was shut down
            with self._changed:
                self._error = self._error or error
                self._pending -= 1
                self._changed.notify_all()
            return
        self._enqueue(lane, _Entry(partial(_use_result, use, ready), ready))

    def _reserve(self) -> None:
        with self._changed:
            while self._pending >= self._max_pending:
                self._changed.wait()
            self._pending += 1

    def _enqueue(self, lane: int, entry: _Entry) -> None:
        with self._changed:
            self._queues[lane].append(entry)
            if self._busy[lane]:
                return
            self._busy[lane] = True
        self._start(lane)

    def _start(self, lane: int) -> None:
        """Runs the lane's next task once its preparation is done."""
        with self._changed:
            ready = self._queues[lane][0].ready
        if ready is None:
            self._schedule(lane)
        else:  # called at once if it is done already
            ready.add_done_callback(lambda _: self._schedule(lane))

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
            task = self._queues[lane].popleft().task
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
            self._start(lane)

    def wait(self) -> None:
        """Blocks until every submitted task has run; re-raises the first error of one."""
        with self._changed:
            while self._pending:
                self._changed.wait()
            error = self._error
        if error is not None:
            raise error


def _use_result(use: Callable[[Prepared], None], ready: Future[Prepared]) -> None:
    use(ready.result())
