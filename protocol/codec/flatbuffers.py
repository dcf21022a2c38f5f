"""The canonical binary form of metadata blocks: FlatBuffers, wrapped in a ``Manifest`` table.

``encode_block`` returns the exact bytes the reference writes and hashes; ``decode_block`` reads
untrusted bytes and fails only with ``DecodeError`` naming the field path;
``peek_prev_block_hash`` reads just the link, for walking a chain backward;
``peek_transfer_facts`` the link, the sequence number and the objects a block adds, for serving it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from struct import Struct

from protocol.codec._fb_generated import decode_metadata_block, encode_metadata_block
from protocol.codec.fb_builder import Builder, packer
from protocol.codec.fb_reader import DECODE_FAILURES, Invalid, Reader
from protocol.codec.fb_values import _multihash_at
from protocol.errors import DecodeError, EncodeError
from protocol.identity import Multicodec, Multihash
from protocol.model import MetadataBlock

METADATA_BLOCK_VERSION = 3
"""Manifest version of blocks written today; the only one read (as in the reference)."""

_BLOCK_KIND = int(Multicodec.ODF_METADATA_BLOCK)
_PACK_I64 = packer("q")
_PACK_I32 = packer("i")
_PACK_U32 = packer("I")
_I64_AT = Struct("<q").unpack_from
_I32_AT = Struct("<i").unpack_from
_U64_AT = Struct("<Q").unpack_from
_BLOCK_FIELDS = 5
"""Slots of the ``MetadataBlock`` table: systemTime, prevBlockHash, sequenceNumber, event type, event."""
_PADDING = (b"", b"\0\0\0", b"\0\0", b"\0")
"""Zeros after ``n`` content bytes, indexed by ``n % 4``."""


def build_manifest(content: bytes) -> bytes:
    """The manifest table around a finished block buffer, laid out by the builder."""
    outer = Builder()
    content_offset = outer.byte_vector(content)
    outer.start_table()
    outer.add_scalar_default(0, _PACK_I64, 8, _BLOCK_KIND)
    outer.add_scalar_default(1, _PACK_I32, 4, METADATA_BLOCK_VERSION)
    outer.add_offset(2, content_offset)
    return outer.finish(outer.end_table())


def _manifest_heads() -> tuple[bytes, ...]:
    """What precedes the content's length prefix in ``build_manifest(content)``.

    All offsets are relative and every padding depends on the content length modulo 8 only, so
    these eight byte strings (one per residue) plus the length, the content and its padding to 4
    bytes are the whole manifest: one concatenation instead of a second builder per block.
    """
    heads = []
    for residue in range(8):
        content = bytes(residue)
        tail = _PACK_U32(residue) + content + _PADDING[residue & 3]
        manifest = build_manifest(content)
        heads.append(manifest[: len(manifest) - len(tail)])
    return tuple(heads)


_MANIFEST_HEADS = _manifest_heads()


def encode_block(block: MetadataBlock) -> bytes:
    """The manifest-wrapped FlatBuffers bytes of ``block``, whose SHA3-256 is the block hash."""
    if type(block) is not MetadataBlock:
        raise EncodeError(f"expected a MetadataBlock, got {type(block).__name__}")
    try:
        inner = Builder()
        content = inner.finish(encode_metadata_block(inner, block))
    except (AttributeError, TypeError, KeyError) as error:
        raise EncodeError(
            f"block (sequence number {block.sequence_number!r}) is malformed: {error}"
        ) from None
    n = len(content)
    return _MANIFEST_HEADS[n & 7] + _PACK_U32(n) + content + _PADDING[n & 3]


def block_hash(data: bytes) -> Multihash:
    """The hash of a block's canonical bytes (as returned by ``encode_block``)."""
    return Multihash.from_digest_sha3_256(data)


def is_block_hash(hash: Multihash, data: bytes) -> bool:
    """Whether ``hash`` names the block ``data``: ``block_hash(data) == hash`` without building the
    multihash, for checking every block file of a chain."""
    return hash.code == Multicodec.SHA3_256 and hash.digest == hashlib.sha3_256(data).digest()


def hash_block(block: MetadataBlock) -> tuple[Multihash, bytes]:
    """Encode ``block`` and return its hash with the bytes."""
    data = encode_block(block)
    return Multihash.from_digest_sha3_256(data), data


def decode_block(data: bytes) -> MetadataBlock:
    """Read a manifest-wrapped block from untrusted bytes."""
    data = bytes(data)
    content = _manifest_content(data)
    reader = Reader(content)
    try:
        return decode_metadata_block(reader, 0, 0)
    except Invalid as error:
        path = error.field_path()
        where = f" at `{path}`" if path else ""
        raise DecodeError(f"metadata block is malformed{where}: {error.reason}") from None
    except DECODE_FAILURES as error:
        raise DecodeError(f"metadata block is malformed: {error or type(error).__name__}") from None


def peek_prev_block_hash(data: bytes) -> Multihash | None:
    """``prevBlockHash`` of a manifest-wrapped block, read without decoding the event.

    Walking a chain backward needs only this field of each block. Reads through the same
    bounds-checked ``Reader`` (``DecodeError`` if the bytes are malformed); the manifest's kind and
    version are checked when the block is decoded.
    """
    try:
        outer = Reader(data)
        manifest, (_, _, content_at) = outer.table_fields(0, 3)
        if not content_at:
            raise Invalid("content", "required field is missing")
        inner = Reader(outer.bytes(manifest + content_at))
        block, (_, prev_at, *_) = inner.table_fields(0, _BLOCK_FIELDS)
        return _multihash_at(inner, block + prev_at) if prev_at else None
    except Invalid as error:
        raise DecodeError(f"metadata block is malformed: {error}") from None
    except DECODE_FAILURES as error:
        raise DecodeError(f"metadata block is malformed: {error or type(error).__name__}") from None


@dataclass(frozen=True, slots=True)
class TransferFacts:
    """What serving a block in a transfer needs from it: its link and sequence number (to walk
    and check the chain) and what its ``newData`` / ``newCheckpoint`` add (for the plan)."""

    prev_block_hash: Multihash | None
    sequence_number: int
    objects: int
    object_bytes: int
    records: int


_OBJECT_FIELDS = {1: (7, 2, 3), 2: (6, 3, 4)}
"""``MetadataEvent`` union tag -> (table's field count, ``newData`` slot, ``newCheckpoint`` slot),
for ``AddData`` (1) and ``ExecuteTransform`` (2), the events that add objects."""


def peek_transfer_facts(data: bytes) -> TransferFacts:
    """``TransferFacts`` of a manifest-wrapped block, read without decoding the rest of it.

    A third of ``decode_block``'s work: a node serving its chain walks every block of it, and
    the receiver decodes and checks each one in full anyway. The manifest's kind and version
    are checked; reads are bounds-checked (``DecodeError``)."""
    content = _manifest_content(bytes(data))
    try:
        reader = Reader(content)
        block, (_, prev_at, number_at, tag_at, event_at) = reader.table_fields(0, _BLOCK_FIELDS)
        prev = _multihash_at(reader, block + prev_at) if prev_at else None
        number = _U64_AT(content, block + number_at)[0] if number_at else 0
        objects = object_bytes = records = 0
        layout = _OBJECT_FIELDS.get(content[block + tag_at] if tag_at else 0)
        if layout is not None and event_at:
            count, data_slot, checkpoint_slot = layout
            event, fields = reader.table_fields(block + event_at, count)
            if fields[data_slot]:
                piece, (_, _, interval_at, size_at) = reader.table_fields(
                    event + fields[data_slot], 4
                )
                if not interval_at:
                    raise Invalid("newData.offsetInterval", "required field is missing")
                interval, (start_at, end_at) = reader.table_fields(piece + interval_at, 2)
                start = _U64_AT(content, interval + start_at)[0] if start_at else 0
                end = _U64_AT(content, interval + end_at)[0] if end_at else 0
                objects += 1
                object_bytes += _U64_AT(content, piece + size_at)[0] if size_at else 0
                records += end - start + 1
            if fields[checkpoint_slot]:
                checkpoint, (_, size_at) = reader.table_fields(event + fields[checkpoint_slot], 2)
                objects += 1
                object_bytes += _U64_AT(content, checkpoint + size_at)[0] if size_at else 0
    except Invalid as error:
        raise DecodeError(f"metadata block is malformed: {error}") from None
    except DECODE_FAILURES as error:
        raise DecodeError(f"metadata block is malformed: {error or type(error).__name__}") from None
    return TransferFacts(prev, number, objects, object_bytes, records)


def _manifest_content(data: bytes) -> bytes:
    reader = Reader(data)
    try:
        table, (kind_at, version_at, content_at) = reader.table_fields(0, 3)
        kind = _I64_AT(data, table + kind_at)[0] if kind_at else 0
        version = _I32_AT(data, table + version_at)[0] if version_at else 0
        if not content_at:
            raise Invalid("content", "required field is missing")
        content = reader.bytes(table + content_at)
    except Invalid as error:
        raise DecodeError(f"block manifest is malformed: {error.reason}") from None
    except DECODE_FAILURES as error:
        raise DecodeError(f"block manifest is malformed: {error or type(error).__name__}") from None
    if kind != _BLOCK_KIND:
        raise DecodeError(f"manifest kind {kind:#x} is not a metadata block ({_BLOCK_KIND:#x})")
    if version != METADATA_BLOCK_VERSION:
        raise DecodeError(
            f"metadata block manifest version {version} is not supported (supported: {METADATA_BLOCK_VERSION})"
        )
    return content
