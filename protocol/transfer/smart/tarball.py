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
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

from protocol.codec.flatbuffers import block_hash, is_block_hash
from protocol.errors import ParseError, ProtocolError
from protocol.identity import Multihash

MAX_BLOCK_BYTES = 16 << 20
"""The largest block accepted (blocks are usually well under a kilobyte)."""


_BLOCK = 512
_RECORD = 20 * _BLOCK
_GNU_MAGIC = b"ustar  \0"
_POSIX_MAGIC = b"ustar\x0000"
_GNU_OWNER = b"0000644\0" + b"0000000\0" * 2
_GNU_MTIME = b"00000000000\0"
_GNU_DEVICES = bytes(16)


class TarballError(ProtocolError):
    """A metadata tarball is malformed, unsafe, over its limits, or holds a wrong block."""


@dataclass(frozen=True, slots=True)
class TarballLimits:
    max_blocks: int = 10_000_000
    max_block_bytes: int = MAX_BLOCK_BYTES
    max_total_bytes: int = 4 << 30


def pack_blocks(
    blocks: Iterable[tuple[Multihash, bytes]], *, compresslevel: int = 3
) -> tuple[int, bytes]:
    """Blocks (oldest first) as a gzipped tar; returns the block count and the archive.

    Level 3, not gzip's usual 6: for 10,000 blocks, packing, the message's JSON both ways and
    unpacking cost 0.196 s CPU instead of 0.230 s, for a payload 9% larger (1.25 MB, not 1.14).

    The headers are the ones ``tarfile`` writes in GNU format for a regular file of mode 0644
    (a test holds them byte-identical), built here directly: ``tarfile``'s header objects cost
    more than compressing the archive."""
    parts: list[bytes] = []
    for hash, data in blocks:
        parts.append(_gnu_header(hash.to_multibase().encode(), len(data)))
        parts.append(data)
        parts.append(bytes(-len(data) % _BLOCK))
    raw = b"".join(parts)
    raw += bytes(-(len(raw) + 2 * _BLOCK) % _RECORD + 2 * _BLOCK)
    return len(parts) // 3, gzip.compress(raw, compresslevel=compresslevel, mtime=0)


_GNU_TAIL = b"0" + bytes(100) + _GNU_MAGIC + bytes(64) + _GNU_DEVICES
"""Type flag, link name, magic, owner names and device numbers: the same in every header."""
_GNU_FIXED_SUM = sum(_GNU_OWNER) + sum(_GNU_MTIME) + sum(_GNU_TAIL) + 8 * 0x20
"""What the fixed fields add to a header's checksum (its own field counts as eight spaces)."""


def _gnu_header(name: bytes, size: int) -> bytes:
    if len(name) > 100 or size >= 8**11:
        raise TarballError(f"block {name!r} of {size} bytes does not fit a plain tar header")
    size_field = b"%011o\0" % size
    checksum = _GNU_FIXED_SUM + sum(name) + sum(size_field)
    head = name.ljust(100, b"\0") + _GNU_OWNER + size_field + _GNU_MTIME
    return (head + b"%06o\0 " % checksum + _GNU_TAIL).ljust(_BLOCK, b"\0")


def unpack_blocks(
    payload: bytes, *, expected_count: int | None = None, limits: TarballLimits = TarballLimits()
) -> list[tuple[Multihash, bytes]]:
    """The verified ``(hash, bytes)`` of every block in the archive, in archive order.

    Raises ``TarballError`` naming the member at the first problem.
    """
    try:
        blocks = _plain_blocks(payload, limits)
    except _Unusual:
        # Anything the fast path does not read itself (pax or long-name headers, base-256
        # sizes, a damaged stream, a member that fails a check) is read again by ``tarfile``,
        # and ``_verified`` names the problem.
        blocks = _verified(_tarfile_members(payload), limits)
    if expected_count is not None and len(blocks) != expected_count:
        raise TarballError(
            f"metadata tarball holds {len(blocks)} blocks, the message says {expected_count}"
        )
    return blocks


Members = Iterator[tuple[tarfile.TarInfo, Callable[[int], bytes]]]
"""Each member's header and a reader of its first n bytes, in archive order."""


def _verified(members: Members, limits: TarballLimits) -> list[tuple[Multihash, bytes]]:
    blocks: list[tuple[Multihash, bytes]] = []
    seen: set[Multihash] = set()
    total = 0
    try:
        for member, read in members:
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
            data = read(member.size + 1)
            if len(data) != member.size:
                raise TarballError(
                    f"{where}: holds {len(data)} bytes, its header says {member.size}"
                )
            if not is_block_hash(hash, data):
                raise TarballError(
                    f"{where}: block bytes hash to {block_hash(data)}, not to its name"
                )
            seen.add(hash)
            blocks.append((hash, data))
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile, ValueError) as err:
        if isinstance(err, TarballError):
            raise
        raise TarballError(f"metadata tarball is not a valid gzipped tar: {err}") from None
    return blocks


def _plain_blocks(payload: bytes, limits: TarballLimits) -> list[tuple[Multihash, bytes]]:
    """``unpack_blocks`` of an archive with nothing wrong in it, as ``pack_blocks`` and the
    reference write it: plain headers, canonical (base16) block names, every check passed.

    Anything else raises ``_Unusual`` and the archive is read again by ``tarfile`` and
    ``_verified``, which names the problem. This path checks the same things at half the CPU: no header object,
    reader or generator step per member (10,000 blocks: ~0.09 -> ~0.05 s)."""
    stream = _Gunzip(payload)
    read = stream.read
    blocks: list[tuple[Multihash, bytes]] = []
    seen: set[Multihash] = set()
    total = 0
    try:
        while True:
            header = read(_BLOCK)
            if len(header) < _BLOCK:
                raise _Unusual
            if header[0] == 0:  # no name: the end-of-archive marker, or something odd
                if header.count(0) != _BLOCK:
                    raise _Unusual
                stream.finish()
                return blocks
            magic = header[257:265]
            if not (magic == _GNU_MAGIC or (magic == _POSIX_MAGIC and header[345] == 0)) or header[
                156
            ] not in (0x30, 0):
                raise _Unusual
            name = header[:100].split(b"\0", 1)[0]
            if name[:1] != b"f" or header[124] & 0x80:
                raise _Unusual
            stored = header[148:156].split(b"\0", 1)[0].strip()
            if int(stored, 8) != sum(header) - sum(header[148:156]) + 8 * 0x20:
                raise _Unusual
            size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
            if size > limits.max_block_bytes or len(blocks) >= limits.max_blocks:
                raise _Unusual
            total += size
            if total > limits.max_total_bytes:
                raise _Unusual
            padded = -(-size // _BLOCK) * _BLOCK
            data = read(padded)
            if len(data) < padded:
                raise _Unusual
            data = data[:size]
            hash = Multihash.from_multibase(name.decode("ascii"))
            if hash in seen or not is_block_hash(hash, data):
                raise _Unusual
            seen.add(hash)
            blocks.append((hash, data))
    except (ValueError, ParseError):  # octal fields, names: ``_verified`` names the problem
        raise _Unusual from None


def _tarfile_members(payload: bytes) -> Members:
    with (
        gzip.GzipFile(fileobj=io.BytesIO(payload)) as stream,
        tarfile.open(fileobj=stream, mode="r|") as tar,
    ):
        for member in tar:
            # Read only once ``_verified`` has checked the header (a link is refused unread).
            yield member, partial(_extract, tar, member)
        # tarfile ends at the end-of-archive marker, or quietly at a header cut short: the gzip
        # stream must go on to its end, where its CRC and length are checked.
        while stream.read(1 << 20):
            pass


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int) -> bytes:
    extracted = tar.extractfile(member)
    if extracted is None:
        raise TarballError(f"metadata tarball member {member.name!r}: not a regular file")
    return extracted.read(limit)


class _Unusual(Exception):
    """The fast path met something it leaves to ``tarfile`` and ``_verified``."""


class _Gunzip:
    """The gunzipped bytes of one gzip member, decompressed as they are read."""

    __slots__ = ("_buffer", "_inflate", "_offset", "_payload")

    _STEP = 1 << 20

    def __init__(self, payload: bytes) -> None:
        self._inflate = zlib.decompressobj(wbits=31)
        self._payload = payload
        self._buffer = b""
        self._offset = 0

    def read(self, n: int) -> bytes:
        while len(self._buffer) - self._offset < n and not self._inflate.eof:
            source = self._inflate.unconsumed_tail or self._payload
            self._payload = b""
            try:
                more = self._inflate.decompress(source, max(self._STEP, n))
            except zlib.error:
                raise _Unusual from None
            self._buffer = self._buffer[self._offset :] + more
            self._offset = 0
            if not more and not self._inflate.unconsumed_tail and not self._inflate.eof:
                break  # the compressed stream ends early
        data = self._buffer[self._offset : self._offset + n]
        self._offset += len(data)
        return data

    def finish(self) -> None:
        """The archive ended: the rest of the stream (the archive's padding) is read to the end
        of the gzip member, whose CRC and length ``zlib`` then checks, so a stream cut short
        after the end-of-archive marker is refused too; a second gzip member is left to
        ``tarfile``."""
        while self.read(self._STEP):
            pass
        if not self._inflate.eof:
            raise TarballError(
                "metadata tarball is not a valid gzipped tar: the gzip stream ends early"
            )
        if self._inflate.unused_data:
            raise _Unusual


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
