"""Unsigned varints as the multiformats spec defines them (LEB128, minimal, at most 9 bytes).

Hand-written rather than taken from ``multiformats.varint`` because multihashes and DIDs are
decoded on hot paths and the generic version is an order of magnitude slower; the tests check this
module against ``multiformats.varint``.
"""

from __future__ import annotations

from functools import lru_cache

MAX_VARINT_BYTES = 9
"""The multiformats spec caps varints at 9 bytes (63 bits of payload)."""


class VarintError(ValueError):
    """Bytes that should start with an unsigned varint do not; callers re-raise a typed error."""


@lru_cache(maxsize=256)
def encode_varint(value: int) -> bytes:
    """Encode ``value`` minimally; cached because only a handful of codes and lengths recur."""
    if value < 0 or value >= 1 << (7 * MAX_VARINT_BYTES):
        raise VarintError(f"{value} cannot be encoded as an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode the varint at ``offset``; return ``(value, offset just past it)``.

    Rejects truncated, over-long (> 9 bytes) and non-minimal encodings, as the spec requires, so
    every value has exactly one binary form and hashes of identifiers are unambiguous.
    """
    value = 0
    shift = 0
    end = min(len(data), offset + MAX_VARINT_BYTES)
    for pos in range(offset, end):
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if byte == 0 and pos > offset:
                raise VarintError(f"varint at byte {offset} is not minimally encoded")
            return value, pos + 1
        shift += 7
    if end - offset == MAX_VARINT_BYTES:
        raise VarintError(f"varint at byte {offset} is longer than {MAX_VARINT_BYTES} bytes")
    raise VarintError(f"varint at byte {offset} is truncated")
