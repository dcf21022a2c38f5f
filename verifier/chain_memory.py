"""What an incremental audit remembers of a dataset's metadata chain.

``VerifiedChain`` names the newest block whose whole history verified, and holds what resuming
from it takes: the chain state there (``storage.chain.saved_state``, read back from the blocks it
names, each re-hashed), the survey counts up to it, and the stat of every block file up to it. It
is kept sealed (``storage.catalog.audit_chains``). An incremental audit first checks that each of
those block files still has the size, mtime, ctime and inode it had when it verified, then reads
only the blocks after the remembered head; a changed block file, a forged or unreadable record, or
a head that is no longer an ancestor of the current one (a rewritten history) means a full check.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multihash
from protocol.model import DatasetKind

RECORD_VERSION = 1
_STAT = struct.Struct("<QqqQB")
"""size, mtime_ns, ctime_ns, inode, length of the block hash that follows."""


@dataclass(frozen=True, slots=True)
class BlockStamp:
    """A block file as it looked when it verified."""

    hash: Multihash
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, hash: Multihash, stat: os.stat_result) -> BlockStamp:
        return cls(hash, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)

    def matches(self, stat: os.stat_result) -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode) == (
            stat.st_size,
            stat.st_mtime_ns,
            stat.st_ctime_ns,
            stat.st_ino,
        )


@dataclass(frozen=True, slots=True)
class VerifiedChain:
    """The chain up to ``head`` verified, with these counts (as ``ChainSurvey`` has them)."""

    head: Multihash
    sequence_number: int
    seed: Multihash
    kind: DatasetKind | None
    slices: int
    checkpoints: int
    data_bytes: int
    transactions: int
    input_ids: tuple[DatasetId, ...]
    state: bytes
    """``SavedState.to_bytes()`` of the chain state at ``head``."""
    blocks: tuple[BlockStamp, ...]
    """Every block file from the ``Seed`` to ``head``."""

    def to_bytes(self) -> bytes:
        stamps = b"".join(
            _STAT.pack(s.size, s.mtime_ns, s.ctime_ns, s.inode, len(raw)) + raw
            for s in self.blocks
            for raw in (s.hash.to_bytes(),)
        )
        document = {
            "version": RECORD_VERSION,
            "head": str(self.head),
            "sequenceNumber": self.sequence_number,
            "seed": str(self.seed),
            "kind": None if self.kind is None else self.kind.value,
            "slices": self.slices,
            "checkpoints": self.checkpoints,
            "dataBytes": self.data_bytes,
            "transactions": self.transactions,
            "inputIds": [str(i) for i in self.input_ids],
            "state": self.state.decode("utf-8"),
            "blocks": base64.b64encode(stamps).decode("ascii"),
        }
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> VerifiedChain | None:
        """``None`` for anything but a record ``to_bytes`` wrote (an old version, damage)."""
        try:
            document = json.loads(data)
            if document.get("version") != RECORD_VERSION:
                return None
            kind = document["kind"]
            return cls(
                head=Multihash.from_multibase(document["head"]),
                sequence_number=int(document["sequenceNumber"]),
                seed=Multihash.from_multibase(document["seed"]),
                kind=None if kind is None else DatasetKind(kind),
                slices=int(document["slices"]),
                checkpoints=int(document["checkpoints"]),
                data_bytes=int(document["dataBytes"]),
                transactions=int(document["transactions"]),
                input_ids=tuple(DatasetId.parse(i) for i in document["inputIds"]),
                state=str(document["state"]).encode("utf-8"),
                blocks=_stamps(base64.b64decode(document["blocks"], validate=True)),
            )
        except (ValueError, KeyError, TypeError, AttributeError, ParseError, struct.error):
            return None


def _stamps(packed: bytes) -> tuple[BlockStamp, ...]:
    stamps = []
    at = 0
    while at < len(packed):
        size, mtime_ns, ctime_ns, inode, length = _STAT.unpack_from(packed, at)
        at += _STAT.size
        hash = Multihash.from_bytes(packed[at : at + length])
        at += length
        stamps.append(BlockStamp(hash, size, mtime_ns, ctime_ns, inode))
    return tuple(stamps)


def blocks_unchanged(stamps: tuple[BlockStamp, ...], path_of: Callable[[Multihash], Path]) -> bool:
    """Whether every stamped block file still looks as it did (blocking: run in a thread)."""
    for stamp in stamps:
        path = path_of(stamp.hash)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return False
        if not stamp.matches(stat):
            return False
    return True
