"""What the benchmarks' baselines share (imported by ``scripts/bench_*.py``, which run with this
folder first on ``sys.path``): making what a baseline wrote durable as odfd makes what it stores,
the data checks a pull runs, alone, and the load average printed beside each figure."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from odfd.sync import data_checks
from odfd.sync.data_checks import check_threads, read_slice_facts
from odfd.sync.progress import Progress


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fsync_tree(root: Path) -> None:
    """fsync every file, then every folder, under ``root`` (what odfd does per stored object)."""
    for folder, _, names in os.walk(root):
        for name in names:
            _fsync(os.path.join(folder, name))
    for folder, _, _ in os.walk(root):
        _fsync(folder)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def syncfs(root: Path) -> None:
    """One ``syncfs(2)`` of the file system holding ``root``: everything written becomes durable."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(root, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs failed")
    finally:
        os.close(fd)


DURABILITY = {"fsync per file": fsync_tree, "one syncfs": syncfs}


def checks_alone(files: list[Path]) -> tuple[float, float]:
    """Seconds and CPU seconds of a pull's data checks of ``files`` with nothing else of this
    process running, on every core, on as many threads as a pull runs them (``check_threads``)."""
    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(check_threads()) as pool:
        list(pool.map(lambda path: read_slice_facts(path, "offset"), files))
    return time.perf_counter() - started, time.process_time() - cpu


class PhaseClock(Progress):
    """A pull's progress that notes when each phase began and when each object was stored, and,
    while ``checks_timed()`` is on, when each data check ran: enough to tell whether a pull's
    downloads and checks overlapped (``overlap_report``)."""

    def __init__(self) -> None:
        super().__init__("bench", enabled=False)
        self.started = time.perf_counter()
        self.cpu_started = time.process_time()
        self.phases: dict[str, float] = {}
        self.stored: list[float] = []

    def set_phase(self, phase: str, objects_total: int | None = None) -> None:
        self.phases.setdefault(phase, time.perf_counter())
        super().set_phase(phase, objects_total)

    def object_done(self, *args: object) -> None:
        self.stored.append(time.perf_counter())
        super().object_done(*args)


_CHECK_SPANS: list[tuple[float, float]] = []


@contextmanager
def checks_timed() -> Iterator[list[tuple[float, float]]]:
    """Record (start, end) of every data check a pull runs, from when it holds a core with its
    file read to its end (the check itself is unchanged)."""
    original = data_checks._read_facts

    def timed(source: pa.NativeFile, offset_column: str) -> data_checks.SliceFacts:
        begun = time.perf_counter()
        try:
            return original(source, offset_column)
        finally:
            _CHECK_SPANS.append((begun, time.perf_counter()))

    _CHECK_SPANS.clear()
    data_checks._read_facts = timed
    try:
        yield _CHECK_SPANS
    finally:
        data_checks._read_facts = original


def overlap_report(clock: PhaseClock, checks: list[tuple[float, float]], ended: float) -> str:
    """Where a pull's time went: metadata, downloads (first phase "objects" to the last object
    stored; a pull that fetches while it walks stores some before that), checks (first start to
    last end; busy = summed check time), what was left to wait for once the last object was
    stored (the blocks being stored beside the downloads, then the checks), naming the fetched
    objects (one ``syncfs``, renames) and the commit."""
    objects = clock.phases.get("objects", clock.started)
    during_walk = sum(1 for at in clock.stored if at < objects)
    last_stored = max(clock.stored, default=objects)
    checking = clock.phases.get("checking data", last_stored)
    committing = clock.phases.get("committing", ended)
    naming = clock.phases.get("naming objects", committing)
    parts = [
        f"metadata {objects - clock.started:.2f} s",
        f"downloads {last_stored - objects:.2f} s more ({len(clock.stored)} objects, "
        f"{during_walk} of them stored during the metadata phase)",
    ]
    if checks:
        first, last = min(s for s, _ in checks), max(e for _, e in checks)
        busy = sum(e - s for s, e in checks)
        during = sum(max(0.0, min(e, last_stored) - s) for s, e in checks)
        parts.append(
            f"checks {first - objects:+.2f}..{last - objects:.2f} s ({len(checks)} files, "
            f"{busy:.2f} s busy, {during / busy if busy else 0:.0%} of it during downloads)"
        )
    # The pull's commit first waits for its blocks to be stored (beside the downloads), then for
    # the checks: both can outlast the last object.
    parts.append(f"waiting for the blocks after the last object {checking - last_stored:.2f} s")
    parts.append(f"waiting for checks after the blocks {naming - checking:.2f} s")
    parts.append(f"naming objects {committing - naming:.2f} s")
    parts.append(f"commit {ended - committing:.2f} s")
    parts.append(f"CPU {time.process_time() - clock.cpu_started:.2f} s in this process")
    return ", ".join(parts)


@dataclass
class Best:
    """The fastest of several rounds of one measurement, with what is printed beside it."""

    seconds: float = float("inf")
    detail: str = ""

    def offer(self, seconds: float, detail: str) -> None:
        if seconds < self.seconds:
            self.seconds, self.detail = seconds, detail
