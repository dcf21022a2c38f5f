"""The metadata tarball of the Smart Transfer Protocol: blocks as a gzipped tar.

Layout, as the reference writes and reads it: one GNU-format regular file per block, oldest
first, at the archive root, named by the block's canonical multibase hash, holding the block's
bytes; the whole tar gzipped (media type ``application/tar+gzip``, encoding ``raw``).

The archive comes from a peer we do not trust, so unpacking is strict: every member must be a
regular file directly at the root (no folders, absolute paths, ``..``, links or devices) named by
a multihash that its bytes hash to, no name twice, and member count, member size and total size
are bounded before anything is read into memory.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.codec.flatbuffers import block_hash
from protocol.errors import ParseError, ProtocolError
from protocol.identity import Multihash

MAX_BLOCK_BYTES = 16 << 20
"""The largest block accepted (blocks are usually well under a kilobyte)."""


class TarballError(ProtocolError):
    """A metadata tarball is malformed, unsafe, over its limits, or holds a wrong block."""


@dataclass(frozen=True, slots=True)
class TarballLimits:
    max_blocks: int = 10_000_000
    max_block_bytes: int = MAX_BLOCK_BYTES
    max_total_bytes: int = 4 << 30


def pack_blocks(
    blocks: Iterable[tuple[Multihash, bytes]], *, compresslevel: int = 6
) -> tuple[int, bytes]:
    """Blocks (oldest first) as a gzipped tar; returns the block count and the archive."""
    raw = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for hash, data in blocks:
            info = tarfile.TarInfo(hash.to_multibase())
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
            count += 1
    return count, gzip.compress(raw.getvalue(), compresslevel=compresslevel, mtime=0)


def unpack_blocks(
    payload: bytes, *, expected_count: int | None = None, limits: TarballLimits = TarballLimits()
) -> list[tuple[Multihash, bytes]]:
    """The verified ``(hash, bytes)`` of every block in the archive, in archive order.

    Raises ``TarballError`` naming the member at the first problem.
    """
    blocks: list[tuple[Multihash, bytes]] = []
    seen: set[Multihash] = set()
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r|gz") as tar:
            for member in tar:
                where = f"metadata tarball member {len(blocks)} {member.name!r}"
                hash = _check_member(member, where, limits)
                if hash in seen:
                    raise TarballError(f"{where}: the same block appears twice")
                if len(blocks) >= limits.max_blocks:
                    raise TarballError(
                        f"metadata tarball is over the limit of {limits.max_blocks} blocks"
                    )
                total += member.size
                if total > limits.max_total_bytes:
                    raise TarballError(
                        f"metadata tarball is over the limit of {limits.max_total_bytes} bytes"
                    )
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise TarballError(f"{where}: not a regular file")
                data = extracted.read(member.size + 1)
                if len(data) != member.size:
                    raise TarballError(
                        f"{where}: holds {len(data)} bytes, its header says {member.size}"
                    )
                actual = block_hash(data)
                if actual != hash:
                    raise TarballError(f"{where}: block bytes hash to {actual}, not to its name")
                seen.add(hash)
                blocks.append((hash, data))
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, ValueError) as err:
        if isinstance(err, TarballError):
            raise
        raise TarballError(f"metadata tarball is not a valid gzipped tar: {err}") from None
    if expected_count is not None and len(blocks) != expected_count:
        raise TarballError(
            f"metadata tarball holds {len(blocks)} blocks, the message says {expected_count}"
        )
    return blocks


def _check_member(member: tarfile.TarInfo, where: str, limits: TarballLimits) -> Multihash:
    if not (member.isreg() and member.type in (tarfile.REGTYPE, tarfile.AREGTYPE)):
        raise TarballError(f"{where}: only regular files are allowed (type {member.type!r})")
    name = member.name
    if (
        not name
        or name.startswith("/")
        or "/" in name
        or "\\" in name
        or name in (".", "..")
        or "\0" in name
    ):
        raise TarballError(f"{where}: path is outside the archive's root folder")
    if member.size < 0 or member.size > limits.max_block_bytes:
        raise TarballError(
            f"{where}: {member.size} bytes is over the {limits.max_block_bytes}-byte block limit"
        )
    try:
        return Multihash.from_multibase(name)
    except ParseError as err:
        raise TarballError(f"{where}: name is not a block hash: {err}") from None
