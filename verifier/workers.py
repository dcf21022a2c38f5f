"""Where layer 2's file checks run: one job in a thread of this process, more in worker processes
(files up to ``INLINE_BYTES`` on threads of this process, whatever the jobs).

Measured with ``scripts/bench_verify.py``: two *threads* checking Parquet slices kept 1.1 cores
busy and were slower than one, because the logical hash encodes values partly in Python, under
the GIL. So parallel checks run in worker processes, started with ``forkserver`` (never forked
from a process whose Spark JVM is running). Workers add the bytes they check to a shared counter
that the event loop polls for progress; a check's result is a small picklable ``FileCheck``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from types import TracebackType

from protocol.identity import Multihash
from verifier.file_checks import (
    FileCheck,
    OnBytes,
    SliceExpectation,
    check_object,
    check_slice,
)
from verifier.progress import REDRAW_SECONDS, Progress


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    """Size and physical hash of a data or checkpoint file."""

    path: Path
    expected_hash: Multihash
    size: int
    field: str
    weight: float = 1.0
    """Share of each byte read credited to progress."""

    def run(self, on_bytes: OnBytes) -> FileCheck:
        return check_object(self.path, self.expected_hash, self.size, self.field, on_bytes)


@dataclass(frozen=True, slots=True)
class SliceCheck:
    """Size, physical hash and records of a data slice, from one read of the file."""

    path: Path
    expected_hash: Multihash
    size: int
    expectation: SliceExpectation
    weight: float = 1.0

    def run(self, on_bytes: OnBytes) -> FileCheck:
        return check_slice(self.path, self.expected_hash, self.size, self.expectation, on_bytes)


FileTask = ObjectCheck | SliceCheck

INLINE_BYTES = 4 << 20
"""Files up to this size are checked on threads of this process even with several jobs: starting
worker processes (a fork server importing pyarrow) costs more than checking a few small files,
e.g. the new blocks of an incremental audit."""

_worker_counter: Synchronized[int] | None = None


def _init_worker(counter: Synchronized[int]) -> None:
    global _worker_counter
    _worker_counter = counter


def _run_in_worker(task: FileTask) -> FileCheck:
    counter = _worker_counter
    assert counter is not None  # set by the pool's initializer

    def on_bytes(n: int) -> None:
        with counter.get_lock():
            counter.value += int(n * task.weight)

    return task.run(on_bytes)


class CheckRunner:
    """Runs file checks on ``jobs`` workers (started on first use); use as an async context manager."""

    def __init__(self, jobs: int, progress: Progress) -> None:
        self.jobs = jobs
        self._progress = progress
        self._executor: Executor | None = None
        """Worker processes, started on the first file larger than ``INLINE_BYTES``."""
        self._threads: ThreadPoolExecutor | None = None
        self._counter: Synchronized[int] | None = None
        self._reported = 0
        self._poller: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()

    async def __aenter__(self) -> CheckRunner:
        return self

    async def _run_in_thread(self, task: FileTask) -> FileCheck:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(
                max_workers=self.jobs, thread_name_prefix="odfd-verify"
            )

        def on_bytes(n: int) -> None:
            self._progress.advance(bytes=int(n * task.weight))

        return await asyncio.get_running_loop().run_in_executor(self._threads, task.run, on_bytes)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._poller is not None:
            self._poller.cancel()
        for executor in (self._threads, self._executor):
            if executor is not None:
                await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def run(self, task: FileTask) -> FileCheck:
        if self.jobs == 1 or task.size <= INLINE_BYTES:
            return await self._run_in_thread(task)
        async with self._starting:
            if self._executor is None:
                self._executor = await asyncio.to_thread(self._process_pool)
                self._poller = asyncio.create_task(self._poll())
        executor = self._executor
        try:
            # Submitting may start a worker process (seconds, the first time): not on the loop.
            future = await asyncio.to_thread(executor.submit, _run_in_worker, task)
            return await asyncio.wrap_future(future)
        finally:
            self.report_progress()

    def _process_pool(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        # Workers fork from a server that has already imported the checks (pyarrow...).
        context.set_forkserver_preload([__name__])
        self._counter = context.Value("q", 0)
        return ProcessPoolExecutor(
            max_workers=self.jobs,
            mp_context=context,
            initializer=_init_worker,
            initargs=(self._counter,),
        )

    def report_progress(self) -> None:
        """Forwards the bytes workers checked since the last call to the progress display."""
        if self._counter is None:
            return
        done = self._counter.value
        if done > self._reported:
            self._progress.advance(bytes=done - self._reported)
            self._reported = done

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(REDRAW_SECONDS)
            self.report_progress()
