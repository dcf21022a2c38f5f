"""The canonical binary form of metadata blocks: FlatBuffers, wrapped in a ``Manifest`` table.

``encode_block`` returns the exact bytes the reference writes and hashes; ``decode_block`` reads
untrusted bytes and fails only with ``DecodeError`` naming the field path.
"""

from __future__ import annotations

import hashlib

from protocol.codec._fb_generated import decode_metadata_block, encode_metadata_block
from protocol.codec.fb_builder import Builder, packer
from protocol.codec.fb_reader import DECODE_FAILURES, Invalid, Reader
from protocol.errors import DecodeError, EncodeError
from protocol.identity import Multicodec, Multihash
from protocol.model import MetadataBlock

METADATA_BLOCK_VERSION = 3
"""Manifest version of blocks written today; the only one read (as in the reference)."""

_BLOCK_KIND = int(Multicodec.ODF_METADATA_BLOCK)
_PACK_I64 = packer("q")
_PACK_I32 = packer("i")


def encode_block(block: MetadataBlock) -> bytes:
    """The manifest-wrapped FlatBuffers bytes of ``block``, whose SHA3-256 is the block hash."""
    if type(block) is not MetadataBlock:
        raise EncodeError(f"expected a MetadataBlock, got {type(block).__name__}")
    try:
        inner = Builder()
        content = inner.finish(encode_metadata_block(inner, block))
    except (AttributeError, TypeError, KeyError) as error:
        raise EncodeError(f"block (sequence number {block.sequence_number!r}) is malformed: {error}") from None
    outer = Builder()
    content_offset = outer.byte_vector(content)
    outer.start_table()
    outer.add_scalar_default(0, _PACK_I64, 8, _BLOCK_KIND)
    outer.add_scalar_default(1, _PACK_I32, 4, METADATA_BLOCK_VERSION)
    outer.add_offset(2, content_offset)
    return outer.finish(outer.end_table())


def block_hash(data: bytes) -> Multihash:
    """The hash of a block's canonical bytes (as returned by ``encode_block``)."""
    return Multihash.from_digest_sha3_256(data)


def hash_block(block: MetadataBlock) -> tuple[Multihash, bytes]:
    """Encode ``block`` and return its hash with the bytes."""
    data = encode_block(block)
    return Multihash(Multicodec.SHA3_256, hashlib.sha3_256(data).digest()), data


def decode_block(data: bytes) -> MetadataBlock:
    """Read a manifest-wrapped block from untrusted bytes."""
    data = bytes(data)
    content = _manifest_content(data)
    reader = Reader(content)
    try:
        return decode_metadata_block(reader, _root(reader), 0)
    except Invalid as error:
        path = error.field_path()
        where = f" at `{path}`" if path else ""
        raise DecodeError(f"metadata block is malformed{where}: {error.reason}") from None
    except DECODE_FAILURES as error:
        raise DecodeError(f"metadata block is malformed: {error or type(error).__name__}") from None


def _root(reader: Reader) -> int:
    return reader.table(0)


def _manifest_content(data: bytes) -> bytes:
    reader = Reader(data)
    try:
        table = _root(reader)
        kind_at, version_at, content_at = reader.fields(table, 3)
        kind = reader.scalar("<q", 8, table + kind_at) if kind_at else 0
        version = reader.scalar("<i", 4, table + version_at) if version_at else 0
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
