"""Writing a pulled file, and reading it back once for its checks, around the page cache
(``O_DIRECT``), where the file system allows it.

Why: a pull writes every byte it fetches, then its data checks read each data file once. Through
the page cache, each of those bytes lands in a page the kernel has just taken from its free
memory, and on this project's machines (virtual machines that hand free memory back to their
host) filling such pages cost more CPU than the SHA3 of the same bytes: 0.4-1.2 s per 500 MB
written, where ``O_DIRECT`` from a reused buffer costs ~0.02 s. The copy goes through one small
aligned buffer per open file (taken from a bounded pool, so its pages stay warm), the check reads
the whole file into a pooled buffer (files up to ``READ_LIMIT``, two buffers per core at most;
larger files, or files read while every buffer is in use, are read through the cache, in pieces,
as before). Durability does not change: ``O_DIRECT`` bytes reach the device, yet the file's
size and extents are durable only after the ``fsync``/``syncfs`` that comes before its name. Where ``O_DIRECT`` is refused (tmpfs, some network file systems), files
are written and read as plain files.
"""

from __future__ import annotations

import errno
import fcntl
import io
import mmap
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, cast

ALIGN = 4096
"""Offsets, lengths and buffer addresses of ``O_DIRECT`` I/O are multiples of this (the
largest logical block size of common devices)."""
WRITE_BUFFER = 2 << 20
_POOL_MAX = 8
"""Write buffers kept for reuse (a pull writes 8 objects at once)."""
DIRECT_MIN = WRITE_BUFFER
"""Files smaller than this are written and read through the page cache (see ``open_new``)."""
READ_LIMIT = 32 << 20
"""Files up to this size are read whole by ``read_direct`` (into pooled buffers, two per core
at most)."""

READ_BUFFERS_PER_CORE = 2
"""One for the file checked on each core, one for the next file read meanwhile."""

_O_DIRECT = getattr(os, "O_DIRECT", 0)
_pool: list[mmap.mmap] = []
_pool_lock = threading.Lock()


def _take_buffer() -> mmap.mmap:
    with _pool_lock:
        if _pool:
            return _pool.pop()
    return _anonymous(WRITE_BUFFER)


def _give_back(buffer: mmap.mmap) -> None:
    """Pooled unless the pool is full (then dropped: freed once no view of it is left)."""
    _lazily_free(buffer)
    with _pool_lock:
        if len(_pool) < _POOL_MAX:
            _pool.append(buffer)


def open_new(path: Path) -> BinaryIO:
    """Create ``path`` (it must not exist) for writing. Each ``write`` takes the whole chunk; a
    file that grows past one buffer goes on around the page cache if the file system allows it
    (a smaller one is written through the cache at ``close``: for small files the device's
    latency per direct write, and a direct read's, would cost more than the cache's pages)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    return cast(BinaryIO, _DirectWriter(os.open(path, flags, 0o666)))


class _DirectWriter(io.RawIOBase):
    """Bytes gathered in an aligned buffer and written in whole buffers, around the page cache
    from the first whole buffer on (``O_DIRECT`` set on the open file then, if the file system
    takes it); the tail's last partial block goes through the cache (``O_DIRECT`` turned off for
    it). Should the file system refuse an ``O_DIRECT`` write after all, the rest is written as
    to a plain file."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer: mmap.mmap | None = _take_buffer()
        self._view = memoryview(self._buffer)
        self._held = 0
        self._direct = False
        self._tried_direct = False
        self._failed = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data: object) -> int:
        view = memoryview(data).cast("B")  # type: ignore[arg-type]
        written = len(view)
        try:
            while view:
                take = min(WRITE_BUFFER - self._held, len(view))
                self._view[self._held : self._held + take] = view[:take]
                self._held += take
                view = view[take:]
                if self._held == WRITE_BUFFER:
                    if not self._tried_direct:
                        self._go_direct()
                    self._flush(WRITE_BUFFER)
        except BaseException:
            self._failed = True  # closing then writes nothing more (a full disk stays full)
            raise
        return written

    def _flush(self, length: int) -> None:
        """Write the buffer's first ``length`` bytes (a multiple of ``ALIGN`` while direct) and
        keep what follows them at its start."""
        out = self._view[:length]
        while out:
            try:
                out = out[os.write(self._fd, out) :]
            except OSError as err:
                if err.errno != errno.EINVAL or not self._direct:
                    raise
                self._plain()
        rest = self._held - length
        self._view[:rest] = self._view[length : self._held]
        self._held = rest

    def _go_direct(self) -> None:
        self._tried_direct = True
        if _O_DIRECT and _set_direct(self._fd, on=True):
            self._direct = True

    def _plain(self) -> None:
        _set_direct(self._fd, on=False)
        self._direct = False

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._failed:
                self._held = 0
            if self._direct and self._held >= ALIGN:
                self._flush(self._held - self._held % ALIGN)
            if self._held:
                if self._direct:
                    self._plain()
                self._flush(self._held)
        finally:
            self._view.release()
            if self._buffer is not None:
                _give_back(self._buffer)
                self._buffer = None
            os.close(self._fd)
            super().close()


@contextmanager
def read_direct(path: Path) -> Iterator[memoryview | None]:
    """The whole of ``path``, read around the page cache into a pooled buffer that is valid
    until the ``with`` ends; ``None`` (read it as a plain file) if the file is smaller than
    ``DIRECT_MIN`` (``open_new`` wrote it through the cache) or larger than ``READ_LIMIT``,
    if its file system refuses ``O_DIRECT``, or if every pooled buffer is in use.
    ``FileNotFoundError`` if it is missing."""
    buffer: mmap.mmap | None = None
    whole: memoryview | None = None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if _O_DIRECT and DIRECT_MIN <= size <= READ_LIMIT and _set_direct(fd, on=True):
            buffer = _take_read_buffer(-(-size // ALIGN) * ALIGN)
            whole = None if buffer is None else _read_all(fd, memoryview(buffer), size)
    finally:
        os.close(fd)
    try:
        yield whole
    finally:
        if buffer is not None:
            _give_back_read_buffer(buffer)


def _set_direct(fd: int, *, on: bool) -> bool:
    """Turn ``O_DIRECT`` on or off for an open file; False if its file system refuses it."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | _O_DIRECT if on else flags & ~_O_DIRECT)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
        return False
    return True


def _read_all(fd: int, view: memoryview, size: int) -> memoryview | None:
    got = 0
    try:
        while got < size:
            count = os.readv(fd, [view[got:]])
            if count == 0:
                break
            got += count
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
        return None
    return view[:got]


_read_pool: list[mmap.mmap] = []
_read_buffers = 0
"""Read buffers in existence: at most two per core (one file being checked on each core, the
next one read meanwhile; more would only queue for the cores), each at most ``READ_LIMIT``: the
memory they hold is bounded."""


def _take_read_buffer(size: int) -> mmap.mmap | None:
    global _read_buffers
    with _pool_lock:
        if _read_pool:
            buffer = _read_pool.pop()
            if len(buffer) >= size:
                return buffer
            _read_buffers -= 1  # too small: dropped, and a larger one made below
        if _read_buffers >= READ_BUFFERS_PER_CORE * _cores():
            return None
        _read_buffers += 1
    return _anonymous(max(size, WRITE_BUFFER))


def _anonymous(size: int) -> mmap.mmap:
    """Private memory, page-aligned (as ``O_DIRECT`` needs), that ``MADV_FREE`` applies to."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)


def _give_back_read_buffer(buffer: mmap.mmap) -> None:
    _lazily_free(buffer)
    with _pool_lock:
        _read_pool.append(buffer)


def _lazily_free(buffer: mmap.mmap) -> None:
    """A pooled buffer's pages are the kernel's to take under memory pressure (``MADV_FREE``),
    and stay warm for the next use otherwise: an idle process holds no memory it needs."""
    if hasattr(mmap, "MADV_FREE"):
        buffer.madvise(mmap.MADV_FREE)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
