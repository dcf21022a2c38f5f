"""The ``audit_files`` table: files an integrity audit found intact, and how they looked then.

Each row is a ``FileStamp`` — the file's size, mtime, ctime and inode when the audit read it, and
the physical hash it verified — sealed with an HMAC-SHA3-256 under a key that lives in the node's
``keys/`` folder, not in the catalog. Someone who can edit the catalog but not read the key cannot
mark a changed file as verified: a row whose seal does not match is ignored (the file is checked
again), never trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from protocol.identity import DatasetId, Multihash
from storage.atomic import fsync_dir
from storage.catalog.catalog import Catalog
from storage.catalog.columns import hash_from_text, hash_to_text, now_text

KEY_BYTES = 32
KEY_FILE = "audit-state.key"
"""The seal key's name in the workspace's ``keys/`` folder."""


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What a file looked like when an audit verified it (``file`` is relative to the dataset)."""

    file: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    physical_hash: Multihash

    @classmethod
    def of(cls, file: str, stat: os.stat_result, physical_hash: Multihash) -> FileStamp:
        return cls(
            file, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, physical_hash
        )

    def matches(self, stat: os.stat_result, physical_hash: Multihash) -> bool:
        """The file still looks as verified and is still expected to have the verified hash."""
        return (
            self.physical_hash == physical_hash
            and self.size == stat.st_size
            and self.mtime_ns == stat.st_mtime_ns
            and self.ctime_ns == stat.st_ctime_ns
            and self.inode == stat.st_ino
        )


def load_or_create_key(path: Path) -> bytes:
    """The node's audit-state key (created, mode 0600, on first use)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()  # another process created it first
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    return path.read_bytes()


class AuditFileTable:
    """Sealed ``FileStamp`` rows per dataset."""

    def __init__(self, catalog: Catalog, key: bytes) -> None:
        self._sql = catalog.sql
        self._key = key

    def _seal(self, dataset_id: DatasetId, stamp: FileStamp) -> bytes:
        message = b"\0".join(
            [
                str(dataset_id).encode(),
                stamp.file.encode(),
                struct.pack("<QqqQ", stamp.size, stamp.mtime_ns, stamp.ctime_ns, stamp.inode),
                stamp.physical_hash.to_bytes(),
            ]
        )
        return hmac.new(self._key, message, hashlib.sha3_256).digest()

    async def load(self, dataset_id: DatasetId) -> dict[str, FileStamp]:
        """The dataset's stamps whose seal holds (forged or damaged rows are left out)."""
        rows = await self._sql.fetchall(
            "SELECT file, size, mtime_ns, ctime_ns, inode, physical_hash, seal FROM audit_files"
            " WHERE dataset_id = ?",
            (str(dataset_id),),
        )
        stamps: dict[str, FileStamp] = {}
        for file, size, mtime_ns, ctime_ns, inode, physical_hash, seal in rows:
            try:
                stamp = FileStamp(
                    file, size, mtime_ns, ctime_ns, inode, hash_from_text(physical_hash)
                )
            except ValueError:
                continue
            if isinstance(seal, bytes) and hmac.compare_digest(seal, self._seal(dataset_id, stamp)):
                stamps[file] = stamp
        return stamps

    async def save(self, dataset_id: DatasetId, stamps: Iterable[FileStamp]) -> None:
        at = now_text()
        await self._sql.executemany(
            "INSERT INTO audit_files (dataset_id, file, size, mtime_ns, ctime_ns, inode,"
            " physical_hash, seal, verified_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (dataset_id, file) DO UPDATE SET size = excluded.size,"
            " mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns, inode = excluded.inode,"
            " physical_hash = excluded.physical_hash, seal = excluded.seal,"
            " verified_at = excluded.verified_at",
            [
                (
                    str(dataset_id),
                    s.file,
                    s.size,
                    s.mtime_ns,
                    s.ctime_ns,
                    s.inode,
                    hash_to_text(s.physical_hash),
                    self._seal(dataset_id, s),
                    at,
                )
                for s in stamps
            ],
        )

    async def forget(self, dataset_id: DatasetId, files: Iterable[str]) -> None:
        """Drops stamps of files found changed (a later audit checks them in full)."""
        await self._sql.executemany(
            "DELETE FROM audit_files WHERE dataset_id = ? AND file = ?",
            [(str(dataset_id), file) for file in files],
        )
