"""Read only a block's link (``prevBlockHash``) from its bytes, without decoding the event.

Walking a chain backward to find its start needs just this field of every block; decoding the
whole block twice per validation would halve validation speed. Reads through the codec's
bounds-checked ``Reader``; field positions are those of ``MetadataBlock`` in the spec's
``.fbs`` (systemTime, prevBlockHash, sequenceNumber, event_type, event).
"""

from __future__ import annotations

from protocol.codec.fb_reader import DECODE_FAILURES, Invalid, Reader
from protocol.errors import DecodeError
from protocol.identity import Multihash

_PREV_BLOCK_HASH_FIELD = 1
_BLOCK_FIELDS = 5
_MANIFEST_CONTENT_FIELD = 2


def read_prev_block_hash(data: bytes) -> Multihash | None:
    """``prevBlockHash`` of a manifest-wrapped block; ``DecodeError`` if the bytes are malformed.

    The manifest's kind and version are checked when the block is fully decoded.
    """
    try:
        outer = Reader(data)
        manifest = outer.table(0)
        content_at = outer.fields(manifest, 3)[_MANIFEST_CONTENT_FIELD]
        if not content_at:
            raise Invalid("content", "required field is missing")
        inner = Reader(outer.bytes(manifest + content_at))
        block = inner.table(0)
        prev_at = inner.fields(block, _BLOCK_FIELDS)[_PREV_BLOCK_HASH_FIELD]
        if not prev_at:
            return None
        return Multihash.from_bytes(inner.bytes(block + prev_at))
    except (Invalid, DecodeError) as error:
        raise DecodeError(f"metadata block is malformed: {error}") from None
    except DECODE_FAILURES as error:
        raise DecodeError(f"metadata block is malformed: {error or type(error).__name__}") from None
