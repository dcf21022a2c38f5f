"""Writing a pulled file, and reading it back once for its checks, around the page cache
(``O_DIRECT``), where the file system allows it.

Why: a pull writes every byte it fetches, then its data checks read each data file once. Through
the page cache, each of those bytes lands in a page the kernel has just taken from its free
memory, and on this project's machines (virtual machines that hand free memory back to their
host) filling such pages cost more CPU than the SHA3 of the same bytes: 0.4-1.2 s per 500 MB
written, where ``O_DIRECT`` from a reused buffer costs ~0.02 s. The copy goes through one small
aligned buffer per open file (taken from a bounded pool, so its pages stay warm), the check reads
the whole file into a buffer kept per thread (files up to ``READ_LIMIT``; larger ones are read
through the cache, in pieces, as before). Durability does not change: ``O_DIRECT`` bytes reach
the device, yet the file's size and extents are durable only after the ``fsync``/``syncfs`` that
comes before its name. Where ``O_DIRECT`` is refused (tmpfs, some network file systems), files
are written and read as plain files.
"""

from __future__ import annotations

import errno
import fcntl
import io
import mmap
import os
import threading
from pathlib import Path
from typing import BinaryIO, cast

ALIGN = 4096
"""Offsets, lengths and buffer addresses of ``O_DIRECT`` I/O are multiples of this (the
largest logical block size of common devices)."""
WRITE_BUFFER = 2 << 20
_POOL_MAX = 16
"""Write buffers kept for reuse (32 MB at most), beyond those a pull's parallel writes hold."""
READ_LIMIT = 64 << 20
"""Files up to this size are read whole by ``read_direct``, into one buffer per thread."""

_O_DIRECT = getattr(os, "O_DIRECT", 0)
_pool: list[mmap.mmap] = []
_pool_lock = threading.Lock()
_reading = threading.local()


def _take_buffer() -> mmap.mmap:
    with _pool_lock:
        if _pool:
            return _pool.pop()
    return mmap.mmap(-1, WRITE_BUFFER)  # page-aligned, as O_DIRECT needs


def _give_back(buffer: mmap.mmap) -> None:
    with _pool_lock:
        if len(_pool) < _POOL_MAX:
            _pool.append(buffer)
            return
    buffer.close()


def open_new(path: Path) -> BinaryIO:
    """Create ``path`` (it must not exist) for writing, around the page cache if the file system
    allows it (else a plain unbuffered file). Each ``write`` takes the whole chunk."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    if _O_DIRECT:
        try:
            fd = os.open(path, flags | _O_DIRECT, 0o666)
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise
        else:
            return cast(BinaryIO, _DirectWriter(fd))
    return open(os.open(path, flags, 0o666), "wb", buffering=0)


class _DirectWriter(io.RawIOBase):
    """Bytes gathered in an aligned buffer and written in whole buffers; the tail's last partial
    block goes through the page cache (``O_DIRECT`` turned off for it). Should the file system
    refuse an ``O_DIRECT`` write after all, the rest is written as to a plain file."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer: mmap.mmap | None = _take_buffer()
        self._view = memoryview(self._buffer)
        self._held = 0
        self._direct = True
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

    def _plain(self) -> None:
        fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~_O_DIRECT)
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


def read_direct(path: Path) -> memoryview | None:
    """The whole of ``path``, read around the page cache into this thread's buffer (valid until
    the thread's next ``read_direct``); ``None`` if the file is larger than ``READ_LIMIT`` or
    its file system refuses ``O_DIRECT`` (read it as a plain file). ``FileNotFoundError`` if it
    is missing."""
    if not _O_DIRECT:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | _O_DIRECT)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
        return None
    try:
        size = os.fstat(fd).st_size
        if size > READ_LIMIT:
            return None
        view = _read_buffer(-(-size // ALIGN) * ALIGN or ALIGN)
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
    finally:
        os.close(fd)


def _read_buffer(size: int) -> memoryview:
    """This thread's read buffer, grown to ``size`` if smaller."""
    view: memoryview | None = getattr(_reading, "view", None)
    if view is None or len(view) < size:
        view = memoryview(mmap.mmap(-1, max(size, WRITE_BUFFER)))
        _reading.view = view
    return view[:size]
