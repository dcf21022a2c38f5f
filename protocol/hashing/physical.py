"""Physical hashes: SHA3-256 of a data or checkpoint file's exact bytes, as ODF names files.

This module needs only ``hashlib`` (no Arrow, no NumPy), so that :func:`read_whole` can start
reading and hashing a file while the decoder's libraries are still loading.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from protocol.hashing.errors import DataFileError
from protocol.identity import Multicodec, Multihash

_CHUNK_SIZE = 1 << 20
"""Read size for streaming a file: large enough that per-read overhead is negligible."""

IN_MEMORY_BYTES = 256 << 20
"""Largest file read once into memory for both hashes; larger ones are streamed twice."""

_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
"""A whole file is mapped, its pages populated in one call: no copy and no zeroed pages as a
``read`` into fresh memory costs (~0.06 s of system CPU for 128 MB, a tenth of what SHA3 of
its bytes costs)."""


class PhysicalHasher:
    """The physical hash of bytes fed in order: a file's while it is written or read."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha3_256()

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._hasher.update(data)

    def multihash(self) -> Multihash:
        return Multihash(Multicodec.SHA3_256, self._hasher.digest())


def physical_hash_bytes(data: bytes | bytearray | memoryview | mmap.mmap) -> Multihash:
    """The SHA3-256 multihash of ``data``."""
    return Multihash(Multicodec.SHA3_256, hashlib.sha3_256(data).digest())


def physical_hash_file(path: str | os.PathLike[str]) -> Multihash:
    """The SHA3-256 multihash of a file's bytes, read in fixed-size chunks (bounded memory)."""
    hasher = PhysicalHasher()
    buffer = bytearray(_CHUNK_SIZE)
    view = memoryview(buffer)
    try:
        with open(path, "rb", buffering=0) as file:
            while count := file.readinto(buffer):
                hasher.update(view[:count])
    except OSError as error:
        raise DataFileError(f"cannot read {os.fspath(path)}: {error.strerror or error}") from error
    return hasher.multihash()


@dataclass(frozen=True, slots=True)
class WholeFile:
    """A file being read into memory and SHA3'd on an executor's threads (see :func:`read_whole`)."""

    data: Future[bytes | mmap.mmap | None]
    """The file's bytes (mapped, read-only), or ``None`` when it is larger than the limit (it is
    then streamed)."""
    physical: Future[Multihash]


def read_whole(
    path: str | os.PathLike[str], executor: Executor, limit: int = IN_MEMORY_BYTES
) -> WholeFile:
    """Starts mapping ``path`` into memory (up to ``limit`` bytes) and hashing its bytes, on
    ``executor``'s threads: the hash starts as soon as the bytes are read, and a file larger than
    ``limit`` is hashed by streaming it instead. Errors (:class:`DataFileError`) come from the
    futures. ``executor`` must start tasks in the order they were submitted (a
    ``ThreadPoolExecutor`` does): the hash's task waits for the read's. Like any reader of a
    mapped file, the process gets ``SIGBUS`` if the file is truncated while it is being hashed
    (data files are written once and never changed in place).
    """
    where = os.fspath(path)
    data = executor.submit(_read_up_to, where, limit)
    return WholeFile(data, executor.submit(_physical_of, where, data))


def _read_up_to(path: str, limit: int) -> bytes | mmap.mmap | None:
    try:
        with open(path, "rb") as file:
            status = os.fstat(file.fileno())
            if status.st_size > limit:
                return None
            if status.st_size == 0 or not stat.S_ISREG(status.st_mode):
                return file.read()  # nothing to map: empty, or a pipe
            try:
                return mmap.mmap(
                    file.fileno(), status.st_size, flags=_MAP_FLAGS, prot=mmap.PROT_READ
                )
            except OSError:  # a file system that cannot map files
                return file.read()
    except FileNotFoundError as error:
        raise DataFileError(f"cannot read {path}: no such file") from error
    except OSError as error:
        raise DataFileError(f"cannot read {path}: {error.strerror or error}") from error


def _physical_of(path: str, data: Future[bytes | mmap.mmap | None]) -> Multihash:
    content = data.result()
    return physical_hash_file(path) if content is None else physical_hash_bytes(content)
