"""The metadata tarball (layout and strict unpacking) and signed object URLs."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from odfd.server.signing import UrlSigner
from protocol.codec.flatbuffers import encode_block
from protocol.identity import Multihash
from protocol.transfer.smart.tarball import (
    TarballError,
    TarballLimits,
    _plain_blocks,
    _tarfile_members,
    _Unusual,
    _verified,
    pack_blocks,
    unpack_blocks,
)
from tests.storage.chain_builder import ChainBuilder, schema


def blocks() -> list[tuple[Multihash, bytes]]:
    builder = ChainBuilder()
    builder.add(schema("city"))
    return [(h, encode_block(b)) for h, b in builder.blocks]


def test_layout_is_gzipped_gnu_tar_of_blocks_named_by_hash_oldest_first() -> None:
    items = blocks()
    count, payload = pack_blocks(items)
    assert count == 2 and payload[:2] == b"\x1f\x8b"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(payload))) as tar:
        members = tar.getmembers()
        assert [t.name for t in members] == [str(h) for h, _ in items]
        assert all(t.isreg() and t.size == len(d) for t, (_, d) in zip(members, items, strict=True))
        assert tar.extractfile(members[0]).read() == items[0][1]
    assert unpack_blocks(payload, expected_count=2) == items


@pytest.mark.parametrize("count", [0, 1, 2, 19])
def test_headers_are_the_ones_tarfile_writes(count: int) -> None:
    items = (blocks() * 10)[:count]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for hash, data in items:
            info = tarfile.TarInfo(str(hash))
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    assert gzip.decompress(pack_blocks(items)[1]) == raw.getvalue()


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


def member(
    name: str, data: bytes, type: bytes = tarfile.REGTYPE, linkname: str = ""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data) if type == tarfile.REGTYPE else 0
    info.type = type
    info.linkname = linkname
    return info, data if type == tarfile.REGTYPE else b""


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda h, d: [member(f"../{h}", d)], "outside the archive"),
        (lambda h, d: [member(f"/{h}", d)], "outside the archive"),
        (lambda h, d: [member(f"blocks/{h}", d)], "outside the archive"),
        (lambda h, d: [member(str(h), b"", tarfile.SYMTYPE, "/etc/passwd")], "regular files"),
        (lambda h, d: [member(str(h), b"", tarfile.LNKTYPE, "x")], "regular files"),
        (lambda h, d: [member(str(h), b"", tarfile.DIRTYPE)], "regular files"),
        (lambda h, d: [member(str(h), b"", tarfile.CHRTYPE)], "regular files"),
        (lambda h, d: [member(str(h), b"", tarfile.FIFOTYPE)], "regular files"),
        (lambda h, d: [member("not-a-hash", d)], "not a block hash"),
        (lambda h, d: [member(str(h), d + b"x")], "hash to"),
        (lambda h, d: [member(str(h), d), member(str(h), d)], "twice"),
    ],
)
def test_unsafe_or_wrong_members_are_refused(make, match) -> None:
    hash, data = blocks()[0]
    payload = tar_of(*make(hash, data))
    with pytest.raises(TarballError, match=match):
        unpack_blocks(payload)
    with pytest.raises(_Unusual):  # the fast path leaves naming the problem to _verified
        _plain_blocks(payload, TarballLimits())


@pytest.mark.parametrize("count", [0, 1, 2, 19])
def test_the_fast_path_reads_a_sound_archive_as_tarfile_does(count: int) -> None:
    items = [(h, d) for h, d in (blocks() * 10)[:count]]
    unique = list(dict(items).items())
    _, payload = pack_blocks(unique)
    expected = _verified(_tarfile_members(payload), TarballLimits())
    assert _plain_blocks(payload, TarballLimits()) == expected == unique
    for limits in (
        TarballLimits(max_blocks=len(unique) - 1),
        TarballLimits(max_total_bytes=sum(len(d) for _, d in unique) - 1),
    ):
        if unique:
            with pytest.raises(_Unusual):
                _plain_blocks(payload, limits)


def _with_checksums(raw: bytes, field: bytes) -> bytes:
    """``raw`` with every header's checksum written as ``field % checksum``."""
    out = bytearray(raw)
    at = 0
    while out[at]:
        checksum = int(out[at + 148 : at + 154], 8)
        out[at + 148 : at + 156] = field % checksum
        at += 512 + -(-int(out[at + 124 : at + 135], 8) // 512) * 512
    return bytes(out)


def test_the_fast_path_reads_the_reference_checksums_and_refuses_a_wrong_one() -> None:
    """The reference's ``tar`` crate writes 7 octal digits and NUL where tarfile writes 6, NUL and
    a space: both are read by the fast path; a checksum one off is left to tarfile, which refuses
    it."""
    items = blocks()
    raw = gzip.decompress(pack_blocks(items)[1])
    reference = _with_checksums(raw, b"%07o\0")
    assert reference != raw
    assert _plain_blocks(gzip.compress(reference), TarballLimits()) == items
    for wrong in (b"%07o\0", b"%06o\0 "):
        damaged = bytearray(_with_checksums(raw, wrong))
        damaged[153 if wrong.endswith(b" ") else 154] ^= 1  # the last digit, one off
        with pytest.raises(_Unusual):
            _plain_blocks(gzip.compress(bytes(damaged)), TarballLimits())
        with pytest.raises(TarballError, match="not a valid gzipped tar"):
            unpack_blocks(gzip.compress(bytes(damaged)))


def test_limits_and_garbage() -> None:
    items = blocks()
    _, payload = pack_blocks(items)
    with pytest.raises(TarballError, match="limit of 1 blocks"):
        unpack_blocks(payload, limits=TarballLimits(max_blocks=1))
    with pytest.raises(TarballError, match="block limit"):
        unpack_blocks(payload, limits=TarballLimits(max_block_bytes=10))
    with pytest.raises(TarballError, match="limit of 100 bytes"):
        unpack_blocks(payload, limits=TarballLimits(max_total_bytes=100))
    with pytest.raises(TarballError, match="the message says 3"):
        unpack_blocks(payload, expected_count=3)
    with pytest.raises(TarballError, match="not a valid gzipped tar"):
        unpack_blocks(b"plain bytes")
    with pytest.raises(TarballError, match="not a valid gzipped tar"):
        unpack_blocks(payload[: len(payload) // 2])


@pytest.mark.parametrize("level", [1, 3, 6, 9])
def test_every_cut_of_the_stream_is_refused(level: int) -> None:
    """Wherever the gzip stream is cut (even after the end-of-archive marker, or between two
    members, where tarfile would stop quietly) the archive is refused, at any level."""
    _, payload = pack_blocks(blocks(), compresslevel=level)
    for cut in range(len(payload)):
        with pytest.raises(TarballError, match="not a valid gzipped tar"):
            unpack_blocks(payload[:cut])


@pytest.mark.parametrize("format", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT])
def test_other_tar_formats_unpack_alike(format: int) -> None:
    """The fast path reads GNU and POSIX headers; anything else (pax) goes through tarfile."""
    items = blocks()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=format) as tar:
        for hash, data in items:
            info = tarfile.TarInfo(str(hash))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert unpack_blocks(gzip.compress(raw.getvalue()), expected_count=2) == items


def test_a_damaged_header_is_refused() -> None:
    items = blocks()
    raw = bytearray(gzip.decompress(pack_blocks(items)[1]))
    second = 512 + -(-len(items[0][1]) // 512) * 512
    for at, match in ((124, "not a valid gzipped tar"), (second + 124, "the message says 2")):
        damaged = bytearray(raw)
        damaged[at] = ord("7")  # a member's size, under a checksum that now lies
        with pytest.raises(TarballError, match=match):
            unpack_blocks(gzip.compress(bytes(damaged)), expected_count=2)


def test_signed_urls_grant_one_operation_until_they_expire() -> None:
    signer = UrlSigner(b"k" * 32, ttl_seconds=60)
    hash = Multihash.from_digest_sha3_256(b"object")
    query, expires = signer.sign("PUT", "session-1", "data", hash, 42, now=1000.0)
    assert int(expires.timestamp()) == 1060
    assert signer.verify("PUT", "data", hash, query, now=1059.0) == ("session-1", 42)
    assert signer.verify("PUT", "data", hash, query, now=1061.0) is None  # expired
    assert signer.verify("GET", "data", hash, query, now=1001.0) is None  # other method
    assert signer.verify("PUT", "checkpoints", hash, query, now=1001.0) is None  # other folder
    assert (
        signer.verify("PUT", "data", Multihash.from_digest_sha3_256(b"x"), query, now=1001.0)
        is None
    )
    for field, value in (
        ("size", "43"),
        ("scope", "session-2"),
        ("expires", "99999"),
        ("signature", "0" * 64),
    ):
        assert signer.verify("PUT", "data", hash, {**query, field: value}, now=1001.0) is None
    assert UrlSigner(b"other" * 8, 60).verify("PUT", "data", hash, query, now=1001.0) is None
