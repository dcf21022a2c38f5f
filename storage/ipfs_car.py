"""The raw blocks of a CAR v1 stream (what a node's ``dag/export`` sends): a varint-prefixed
header, then sections of varint length, CID and block bytes (the IPLD CARv1 specification).

odfd reads a published dataset's ``blocks/`` and ``data/`` folders in one export each instead of
one gateway request per file; a file that fits one chunk is a single raw block (``raw-leaves``),
so its bytes are the block of its CID. Nothing here is trusted: whoever takes a block checks it
against its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from storage.errors import StorageError

_RAW_CODEC = 0x55
_DAG_PB_CODEC = 0x70
_UNIXFS_FOLDER_TYPES = (1, 5)  # UnixFS Directory and HAMTShard
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


def raw_blocks(
    chunks: Iterable[bytes], max_bytes: int, *, stop_at_file_node: bool = False
) -> Iterator[tuple[bytes, bytes]]:
    """``(CID bytes, block bytes)`` of every raw-codec block of the CAR in ``chunks``, stopping
    (without error) once the blocks yielded add up to more than ``max_bytes``. With
    ``stop_at_file_node``, also at the first dag-pb block that is not a folder (a file of
    several chunks, or of CIDv0 leaves): its chunks are no whole file, and reading on would
    move bytes nobody takes."""
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
            if stop_at_file_node and not _is_folder_node(section[cid_length:], codec):
                return
            continue
        total += length - cid_length
        if total > max_bytes:
            return
        yield section[:cid_length], section[cid_length:]


def _cid_prefix(section: bytes) -> tuple[int, int]:
    """Length and codec of the CID a section starts with."""
    if section.startswith(_CIDV0_PREFIX):
        return _CIDV0_LENGTH, _DAG_PB_CODEC
    at = 0
    fields = []
    for _ in range(4):  # version, codec, multihash code, digest length
        value, at = _varint_at(section, at, "a CAR section ends inside its CID")
        fields.append(value)
    version, codec, _, digest_length = fields
    if version != 1 or at + digest_length > len(section):
        raise CarFormatError(f"a CAR section starts with no CID (version {version})")
    return at + digest_length, codec


def _is_folder_node(block: bytes, codec: int) -> bool:
    """A dag-pb block whose UnixFS type is a folder (Directory or HAMTShard). Only a hint for
    when to stop reading: a block misread here costs a request, never a check (whoever takes a
    block hashes it)."""
    if codec != _DAG_PB_CODEC:
        return False
    unixfs = _field(block, 1)  # PBNode.Data
    if unixfs is None or not unixfs.startswith(b"\x08"):  # UnixFS Data.Type, a varint
        return False
    kind, _ = _varint_at(unixfs, 1, "a UnixFS node ends inside its type")
    return kind in _UNIXFS_FOLDER_TYPES


def _field(message: bytes, number: int) -> bytes | None:
    """The first length-delimited field ``number`` of a protobuf message (``None``: absent)."""
    at = 0
    while at < len(message):
        tag, at = _varint_at(message, at, "a dag-pb node ends inside a field tag")
        if tag & 7 != 2:  # dag-pb's PBNode has length-delimited fields only
            raise CarFormatError(f"a dag-pb node has field {tag >> 3} of wire type {tag & 7}")
        length, at = _varint_at(message, at, "a dag-pb node ends inside a field length")
        if at + length > len(message):
            raise CarFormatError("a dag-pb field runs past its node")
        if tag >> 3 == number:
            return message[at : at + length]
        at += length
    return None


def _varint_at(data: bytes, at: int, truncated: str) -> tuple[int, int]:
    """The unsigned LEB128 varint at ``at`` and the offset after it."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise CarFormatError(truncated)
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
