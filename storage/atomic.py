"""Crash-safe file writes: stage under a temporary name, fsync, rename, fsync the folder.

A reader (or a process restarted after ``SIGKILL`` or power loss) sees either the old file or the
complete new one, never a prefix. Staged names start with ``.pending-`` like the reference's, so
every store skips them when listing.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from storage.errors import disk_full
from storage.layout import STAGING_PREFIX

_STEM = secrets.token_hex(4)
_NUMBERS = itertools.count()


def staging_path(folder: Path) -> Path:
    """A name no other writer uses: this process's random stem, its pid (a forked child keeps
    the stem) and a counter. Not ``os.urandom`` per name: a pull's event loop names a staging
    file per object, and each ``urandom`` call let go of the GIL and waited to get it back behind
    the downloads' checks (~0.1 ms each)."""
    return folder / f"{STAGING_PREFIX}{_STEM}-{os.getpid():x}-{next(_NUMBERS):x}"


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_staged(folder: Path, data: bytes, *, mode: int = 0o644, sync: bool = True) -> Path:
    """Write ``data`` durably to a new staging file in ``folder`` (created with ``mode``, so a
    secret is never readable by others, not even for a moment) and return its path.
    ``sync=False`` leaves making it durable to the caller (``sync_file_system``, before the
    file gets its name)."""
    path = staging_path(folder)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException as err:
        os.close(fd)
        path.unlink(missing_ok=True)
        if isinstance(err, OSError) and (full := disk_full(err, folder)) is not None:
            raise full from None
        raise
    os.close(fd)
    return path


def write_file_atomic(path: Path, data: bytes, *, sync_dir: bool = True, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically and durably (the new file has ``mode``)."""
    staged = write_staged(path.parent, data, mode=mode)
    try:
        os.replace(staged, path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def sync_file_system(folder: Path) -> bool:
    """Make everything written to the file system holding ``folder`` durable with one
    ``syncfs(2)`` (Linux): for many small files, one flush of the device's queue instead of a
    journal commit per file. ``False`` where the call does not exist (the caller then fsyncs
    each file)."""
    import ctypes  # here, not at the top: the CLI's start-up need not pay for it

    syncfs = _syncfs()
    if syncfs is None:
        return False
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"syncfs of {folder}: {os.strerror(number)}")
    finally:
        os.close(fd)
    return True


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    import ctypes

    try:
        function: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    return function


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_file_atomic(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst`` durably; across file systems, copy to a staging file first."""
    fsync_file(src)
    try:
        os.replace(src, dst)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        staged = staging_path(dst.parent)
        try:
            shutil.copyfile(src, staged)
            fsync_file(staged)
            os.replace(staged, dst)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        src.unlink()
    fsync_dir(dst.parent)
