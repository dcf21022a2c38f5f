"""The raw blocks of a CAR v1 stream (what a node's ``dag/export`` sends): a varint-prefixed
header, then sections of varint length, CID and block bytes (the IPLD CARv1 specification).

odfd reads a published dataset's ``blocks/`` folder in one export instead of one gateway request
per metadata block; its files are single raw blocks (``raw-leaves``), so a file's bytes are the
block of its CID. Nothing here is trusted: whoever takes a block checks it against its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from storage.errors import StorageError

_RAW_CODEC = 0x55
_CIDV0_PREFIX = b"\x12\x20"  # sha2-256 multihash of 32 bytes: a CIDv0 (dag-pb, never raw)
_CIDV0_LENGTH = 34


class CarFormatError(StorageError):
    """The stream is not a CAR v1 (truncated, or a length that runs past its section)."""


class _Reader:
    """Exact reads over a stream of chunks."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = bytearray()
        self._at = 0

    def _fill(self, size: int) -> bool:
        while len(self._buffer) - self._at < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                return False
            if self._at:
                del self._buffer[: self._at]
                self._at = 0
            self._buffer += chunk
        return True

    def read(self, size: int) -> bytes:
        if not self._fill(size):
            raise CarFormatError("the CAR stream ends inside a section")
        data = bytes(self._buffer[self._at : self._at + size])
        self._at += size
        return data

    def varint(self) -> int | None:
        """The next unsigned LEB128 varint, ``None`` at the end of the stream."""
        value = shift = 0
        while True:
            if not self._fill(1):
                if shift:
                    raise CarFormatError("the CAR stream ends inside a varint")
                return None
            byte = self._buffer[self._at]
            self._at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise CarFormatError("a varint in the CAR stream is longer than 9 bytes")


def raw_blocks(chunks: Iterable[bytes], max_bytes: int) -> Iterator[tuple[bytes, bytes]]:
    """``(CID bytes, block bytes)`` of every raw-codec block of the CAR in ``chunks``, stopping
    (without error) once the blocks yielded add up to more than ``max_bytes``."""
    reader = _Reader(chunks)
    header = reader.varint()
    if header is None:
        raise CarFormatError("the CAR stream is empty")
    reader.read(header)
    total = 0
    while (length := reader.varint()) is not None:
        section = reader.read(length)
        cid_length, codec = _cid_prefix(section)
        if codec != _RAW_CODEC:
            continue
        total += length - cid_length
        if total > max_bytes:
            return
        yield section[:cid_length], section[cid_length:]


def _cid_prefix(section: bytes) -> tuple[int, int]:
    """Length and codec of the CID a section starts with."""
    if section.startswith(_CIDV0_PREFIX):
        return _CIDV0_LENGTH, -1
    at = 0
    fields = []
    for _ in range(4):  # version, codec, multihash code, digest length
        value = shift = 0
        while True:
            if at >= len(section):
                raise CarFormatError("a CAR section ends inside its CID")
            byte = section[at]
            at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        fields.append(value)
    version, codec, _, digest_length = fields
    if version != 1 or at + digest_length > len(section):
        raise CarFormatError(f"a CAR section starts with no CID (version {version})")
    return at + digest_length, codec
