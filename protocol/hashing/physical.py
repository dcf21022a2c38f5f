"""Physical hashes: SHA3-256 of a data or checkpoint file's exact bytes, as ODF names files."""

from __future__ import annotations

import hashlib
import os

from protocol.hashing.errors import DataFileError
from protocol.identity import Multicodec, Multihash

_CHUNK_SIZE = 1 << 20
"""Read size for streaming a file: large enough that per-read overhead is negligible."""


class PhysicalHasher:
    """The physical hash of bytes fed in order: a file's while it is written or read."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha3_256()

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._hasher.update(data)

    def multihash(self) -> Multihash:
        return Multihash(Multicodec.SHA3_256, self._hasher.digest())


def physical_hash_bytes(data: bytes | bytearray | memoryview) -> Multihash:
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
