"""One place for a workspace's temporary files: ``<workspace>/staging/``.

Each process that writes gets its own subfolder there (``<pid>-<random>``), held under an
exclusive ``flock`` for as long as the process has the workspace open. Objects are written into
it, fsynced, then renamed into their dataset folder, so a process killed mid-write (``kill -9``,
power loss) leaves its partial files only there. The kernel drops the lock of a dead process:
the next process to open the workspace (and ``odfd system gc``) removes every subfolder nobody
holds. A new dataset's pull stages in ``datasets/.pull-*`` folders, locked the same way.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PULL_PREFIX = ".pull-"
"""Staging folders of new datasets' first pulls, in the datasets folder (kept to resume)."""


def try_lock_folder(folder: Path) -> int | None:
    """An open descriptor of ``folder`` holding its exclusive ``flock``, or ``None`` if another
    open descriptor (in this or another process) holds it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextmanager
def holding_folder(folder: Path | None) -> Iterator[None]:
    """Holds ``folder``'s exclusive ``flock`` (waiting for it) while a dataset is put in place
    there and its catalog row written, so a recovery never adopts it half-way
    (``storage.orphans``); ``None``: nothing to hold (a bucket)."""
    if folder is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a recovery holds it only to look: never for long
        yield
    finally:
        os.close(fd)


def remove_if_unlocked(folder: Path) -> bool:
    """Remove ``folder`` unless someone holds its lock; True if it was removed."""
    try:
        fd = try_lock_folder(folder)
    except FileNotFoundError:
        return False
    if fd is None:
        return False
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)
    return True


class Scratch:
    """This process's staging subfolder of a workspace, created on first use."""

    def __init__(self, staging_root: Path) -> None:
        self.root = staging_root
        self._folder: Path | None = None
        self._fd: int | None = None
        self._lock = threading.Lock()  # stores call ``folder`` from worker threads

    def folder(self) -> Path:
        with self._lock:
            if self._folder is None:
                self.root.mkdir(exist_ok=True)
                folder = self.root / f"{os.getpid()}-{secrets.token_hex(4)}"
                folder.mkdir()
                fd = try_lock_folder(folder)
                assert fd is not None  # nobody else knows the fresh name
                self._folder, self._fd = folder, fd
            return self._folder

    def close(self) -> None:
        """Remove the subfolder (anything still in it belonged to writes that did not finish)."""
        if self._folder is not None and self._fd is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            os.close(self._fd)
            self._folder = self._fd = None


def sweep_staging(staging_root: Path) -> list[Path]:
    """Remove what dead processes left in ``staging_root``; returns what was removed."""
    removed: list[Path] = []
    if not staging_root.is_dir():
        return removed
    for entry in sorted(staging_root.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            if remove_if_unlocked(entry):
                removed.append(entry)
        else:
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed
