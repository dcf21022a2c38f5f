"""What the benchmarks' baselines share (imported by ``scripts/bench_*.py``, which run with this
folder first on ``sys.path``): making what a baseline wrote durable as odfd makes what it stores,
the data checks a pull runs, alone, and the load average printed beside each figure."""

from __future__ import annotations

import ctypes
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odfd.sync.data_checks import read_slice_facts
from protocol.hashing import available_cores


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


def checks_alone(files: list[Path]) -> float:
    """Seconds of a pull's data checks of ``files`` with nothing else running, on every core."""
    started = time.perf_counter()
    with ThreadPoolExecutor(available_cores()) as pool:
        list(pool.map(lambda path: read_slice_facts(path, "offset"), files))
    return time.perf_counter() - started
