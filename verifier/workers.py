"""Where layer 2's file checks run: threads of this process.

A check reads and decodes its file on one of ``jobs`` file threads; the hashing it asks for (the
file's physical hash, the logical hash's columns) runs on hashing threads shared by every check,
side by side with the decoding: one per core (or per job, if there are more jobs than cores), so
that even one job at a time hashes on every core. SHA3 (``hashlib`` on buffers over 2 KiB), Arrow's
Parquet decoder and kernels and NumPy's array operations release the GIL, so threads keep every
core busy without the start-up and pickling of worker processes (measured with
``scripts/bench_verify.py``: the value stream is built by whole-column kernels, so the Python left
under the GIL is a few calls per column and batch). Memory is bounded by ``jobs`` files (each at
most ``protocol.hashing.physical.IN_MEMORY_BYTES`` in memory) and a few batches per file.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from protocol.hashing import available_cores
from protocol.identity import Multihash
from verifier.file_checks import (
    FileCheck,
    OnBytes,
    SliceExpectation,
    check_object,
    check_slice,
)
from verifier.progress import Progress


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    """Size and physical hash of a data or checkpoint file."""

    path: Path
    expected_hash: Multihash
    size: int
    field: str

    def run(self, on_bytes: OnBytes, hashing: Executor) -> FileCheck:
        return check_object(self.path, self.expected_hash, self.size, self.field, on_bytes)


@dataclass(frozen=True, slots=True)
class SliceCheck:
    """Size, physical hash and records of a data slice, from one read of the file."""

    path: Path
    expected_hash: Multihash
    size: int
    expectation: SliceExpectation

    def run(self, on_bytes: OnBytes, hashing: Executor) -> FileCheck:
        return check_slice(
            self.path, self.expected_hash, self.size, self.expectation, on_bytes, hashing
        )


FileTask = ObjectCheck | SliceCheck


class CheckRunner:
    """Runs file checks, ``jobs`` files at a time, on threads started on first use; use as an
    async context manager."""

    def __init__(self, jobs: int, progress: Progress) -> None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        self.jobs = jobs
        self._progress = progress
        self._files: ThreadPoolExecutor | None = None
        self._hashing: ThreadPoolExecutor | None = None

    async def __aenter__(self) -> CheckRunner:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        # Checks first: a running check may still hand work to the hashing threads.
        for executor in (self._files, self._hashing):
            if executor is not None:
                await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    async def run(self, task: FileTask) -> FileCheck:
        if self._files is None or self._hashing is None:
            self._files = ThreadPoolExecutor(self.jobs, thread_name_prefix="odfd-verify")
            self._hashing = ThreadPoolExecutor(
                max(self.jobs, available_cores()), thread_name_prefix="odfd-hash"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._files, task.run, self._progress_bytes, self._hashing
        )

    def _progress_bytes(self, count: int) -> None:
        self._progress.advance(bytes=count)
