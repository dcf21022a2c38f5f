"""What an incremental audit may skip: files whose sealed stamp still matches their stat.

A file is skipped only when the catalog holds a sealed ``FileStamp`` for it (see
``storage.catalog.audit_files``) whose size, mtime, ctime and inode equal the file's now and whose
verified physical hash is still the one its block records. Anything else — a new file, a changed
stat, a forged or missing row — is checked in full. A file changed without changing its stat (a
write followed by resetting mtime within a filesystem that keeps the inode and ctime) is only
caught by a full audit, which the daemon runs on a schedule and ``odfd verify --full`` on demand.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from protocol.identity import Multihash
from storage.catalog.audit_files import FileStamp

RACY_NS = 1_000_000_000
"""A file modified this close before it was read is not stamped: filesystems with coarse
timestamps could give a write just after the read the same mtime (git's "racy clean" problem)."""


@dataclass(slots=True)
class AuditState:
    """Stamps loaded for one dataset, and what this audit learns (to save afterwards)."""

    known: dict[str, FileStamp]
    incremental: bool
    """Skip files whose stamp matches; ``False`` (a full audit) checks every file but still stamps."""
    verified: list[FileStamp] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def unchanged(self, file: str, stat: os.stat_result | None, physical_hash: Multihash) -> bool:
        """Whether ``file`` may be skipped; a stamp that no longer matches is dropped."""
        stamp = self.known.get(file)
        if stamp is None:
            return False
        if stat is not None and stamp.matches(stat, physical_hash):
            return self.incremental
        self.changed.append(file)
        return False

    def passed(
        self, file: str, stat: os.stat_result | None, physical_hash: Multihash, read_at_ns: int
    ) -> None:
        """Records that ``file``, as ``stat`` saw it just before it was read, verified."""
        if stat is not None and stat.st_mtime_ns < read_at_ns - RACY_NS:
            self.verified.append(FileStamp.of(file, stat, physical_hash))

    def failed(self, file: str) -> None:
        if file in self.known:
            self.changed.append(file)


def stat_or_none(path: Path) -> os.stat_result | None:
    """The file's stat, ``None`` if it is missing (the check then reports it)."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def now_ns() -> int:
    return time.time_ns()
