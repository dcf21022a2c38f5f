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
import hashlib
import io
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from protocol.codec.flatbuffers import block_hash, is_block_hash
from protocol.errors import ParseError, ProtocolError
from protocol.identity import Multicodec, Multihash

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
    ``_verified``, which names the problem. This path checks the same things at a third of the
    CPU: the archive is gunzipped whole (up to ``_WHOLE_LIMIT``), one loop finds where each
    member is, and every header's checksum, fields and name are checked at once, as rows of one
    array (10,000 blocks: ~0.09 s by ``tarfile``, ~0.064 s member by member, ~0.038 s so)."""
    import numpy as np  # here: the modules that import this one need not load numpy to start

    raw = _gunzip_whole(payload)
    offsets: list[int] = []
    sizes: list[int] = []
    at, last = 0, len(raw) - _BLOCK
    try:
        while at <= last and raw[at]:  # a header with no name ends the archive
            size = int(raw[at + 124 : at + 135], 8)  # its digits are checked below
            if size < 0:
                raise _Unusual
            offsets.append(at)
            sizes.append(size)
            at += _BLOCK + -(-size // _BLOCK) * _BLOCK
    except ValueError:
        raise _Unusual from None
    if at > last or raw.count(0, at, at + _BLOCK) != _BLOCK:
        raise _Unusual  # cut short, or a header with no name that is not the end marker
    if not offsets:
        return []
    if (
        len(offsets) > limits.max_blocks
        or max(sizes) > limits.max_block_bytes
        or sum(sizes) > limits.max_total_bytes
    ):
        raise _Unusual
    records = np.frombuffer(raw, dtype=np.uint8)[: len(raw) // _BLOCK * _BLOCK]
    headers = records.reshape(-1, _BLOCK)[np.asarray(offsets) // _BLOCK]
    if not _plain_headers(np, headers):
        raise _Unusual
    nibbles = np.frombuffer(_HEX_VALUES, np.uint8)[headers[:, 5:69]]
    if (nibbles > 15).any():
        raise _Unusual
    names = (nibbles[:, 0::2] << 4 | nibbles[:, 1::2]).tobytes()
    blocks: list[tuple[Multihash, bytes]] = []
    sha3_256, trusted, code = hashlib.sha3_256, Multihash._trusted, Multicodec.SHA3_256
    for number, (at, size) in enumerate(zip(offsets, sizes, strict=True)):
        data = raw[at + _BLOCK : at + _BLOCK + size]
        digest = sha3_256(data).digest()
        if digest != names[32 * number : 32 * number + 32]:
            raise _Unusual
        blocks.append((trusted(code, digest), data))
    if len({digest for digest, _ in blocks}) != len(blocks):
        raise _Unusual  # a block twice
    return blocks


_WHOLE_LIMIT = 256 << 20
"""The largest archive the fast path gunzips whole (~500,000 blocks); a larger one (or a gzip
bomb) is read by ``tarfile`` as a stream."""
_NAME_PREFIX = b"f1620"
"""A canonical block name: base16 multibase of a SHA3-256 multihash, 64 lowercase hex digits."""


_HEX_VALUES = bytes(b"0123456789abcdef".find(bytes([code])) & 0xFF for code in range(256))
"""Each byte's value as a lowercase hex digit (0xFF: not one)."""
_OCTAL_PLACES = tuple(8**place for place in range(6, -1, -1))


def _gunzip_whole(payload: bytes) -> bytes:
    """The archive of a gzip stream of one member that ends where the payload ends."""
    inflate = zlib.decompressobj(wbits=31)
    try:
        raw = inflate.decompress(payload, _WHOLE_LIMIT)
    except zlib.error:
        raise _Unusual from None
    if not inflate.eof or inflate.unused_data or inflate.unconsumed_tail:
        raise _Unusual  # cut short, over the limit, or more after it (a second gzip member)
    return raw


def _plain_headers(np: Any, headers: Any) -> bool:
    """Whether every row of ``headers`` is a plain header of a regular file named by a
    canonical block hash: GNU or POSIX magic (no name prefix), type ``0``, an 11-digit octal
    size, an octal checksum that matches (6 digits, NUL, space as ``tarfile`` writes it, or 7
    digits and NUL as the reference's ``tar`` crate does), the name's 69 characters then NUL."""
    field = headers[:, 148:156].astype(np.int64)
    digits = field[:, :7] - ord("0")
    octal = (digits >= 0) & (digits <= 7)
    six = octal[:, :6].all(axis=1) & (field[:, 6] == 0) & (field[:, 7] == ord(" "))
    seven = octal.all(axis=1) & (field[:, 7] == 0)
    stored = np.where(
        six,
        np.where(octal[:, :6], digits[:, :6], 0) @ np.array(_OCTAL_PLACES[1:]),
        np.where(octal, digits, 0) @ np.array(_OCTAL_PLACES),
    )
    sums = headers.sum(axis=1, dtype=np.int64) - field.sum(axis=1) + 8 * ord(" ")
    sizes = headers[:, 124:135]
    magic = headers[:, 257:265]
    gnu = (magic == np.frombuffer(_GNU_MAGIC, np.uint8)).all(axis=1)
    posix = (magic == np.frombuffer(_POSIX_MAGIC, np.uint8)).all(axis=1) & (headers[:, 345] == 0)
    kind = headers[:, 156]
    return bool(
        (six | seven).all()
        and (stored == sums).all()
        and ((sizes >= ord("0")) & (sizes <= ord("7"))).all()
        and (headers[:, 135] == 0).all()
        and (gnu | posix).all()
        and ((kind == ord("0")) | (kind == 0)).all()
        and (headers[:, : len(_NAME_PREFIX)] == np.frombuffer(_NAME_PREFIX, np.uint8)).all()
        and (headers[:, 69] == 0).all()
    )


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
