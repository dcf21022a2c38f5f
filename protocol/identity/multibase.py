"""Multibase: self-describing text encodings of bytes (https://github.com/multiformats/multibase).

Every encoding in the spec's "final" state is supported. Decoding is strict: a string decodes only
if it is the canonical encoding of its bytes (no stray padding, no non-zero pad bits, no
whitespace, no letters of the wrong case), so one value has one spelling per encoding. The only
leniency is the one the reference implementation has: base16 digits may be of either case.

Written over the standard library rather than ``multiformats.multibase``, which is 80-1000x
slower on the multihash hot path (``scripts/bench_multihash.py``) and accepts non-canonical input
(odd-length hex, wrong-case base32); the tests use that package as an independent oracle.
"""

from __future__ import annotations

import base64
import binascii
from enum import Enum

from protocol.identity._errors import InvalidText


class Multibase(Enum):
    """The final multibase encodings; the value is the one-character prefix."""

    BASE16 = "f"
    BASE16_UPPER = "F"
    BASE32 = "b"
    BASE32_UPPER = "B"
    BASE58_BTC = "z"
    BASE64 = "m"
    BASE64_URL = "u"
    BASE64_URL_PAD = "U"


_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_DIGITS = {char: index for index, char in enumerate(_BASE58_ALPHABET)}


def _base58_encode(data: bytes) -> str:
    zeros = len(data) - len(data.lstrip(b"\0"))
    number = int.from_bytes(data, "big")
    digits = []
    while number:
        number, digit = divmod(number, 58)
        digits.append(_BASE58_ALPHABET[digit])
    return "1" * zeros + "".join(reversed(digits))


def _base58_decode(text: str) -> bytes:
    zeros = len(text) - len(text.lstrip("1"))
    number = 0
    for char in text:
        digit = _BASE58_DIGITS.get(char)
        if digit is None:
            raise ValueError(f"{char!r} is not a base58btc digit")
        number = number * 58 + digit
    return b"\0" * zeros + number.to_bytes((number.bit_length() + 7) // 8, "big")


def _base32_encode(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii").rstrip("=")


def _base32_decode(text: str) -> bytes:
    if "=" in text:
        raise ValueError("unexpected padding")
    return base64.b32decode(text + "=" * (-len(text) % 8))


def _base64_decode(text: str, *, padded: bool, altchars: bytes | None) -> bytes:
    if padded:
        if len(text) % 4:
            raise ValueError("padded base64 length is not a multiple of 4")
    elif "=" in text:
        raise ValueError("unexpected padding")
    else:
        text += "=" * (-len(text) % 4)
    return base64.b64decode(text, altchars=altchars, validate=True)


def encode(data: bytes, encoding: Multibase = Multibase.BASE16) -> str:
    """Encode ``data`` with ``encoding`` and prepend its multibase prefix."""
    match encoding:
        case Multibase.BASE16:
            return "f" + data.hex()
        case Multibase.BASE16_UPPER:
            return "F" + data.hex().upper()
        case Multibase.BASE32:
            return "b" + _base32_encode(data).lower()
        case Multibase.BASE32_UPPER:
            return "B" + _base32_encode(data)
        case Multibase.BASE58_BTC:
            return "z" + _base58_encode(data)
        case Multibase.BASE64:
            return "m" + base64.b64encode(data).decode("ascii").rstrip("=")
        case Multibase.BASE64_URL:
            return "u" + base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")
        case Multibase.BASE64_URL_PAD:
            return "U" + base64.urlsafe_b64encode(data).decode("ascii")
    raise TypeError(f"not a Multibase encoding: {encoding!r}")


def _decode_payload(encoding: Multibase, payload: str) -> bytes:
    match encoding:
        case Multibase.BASE16 | Multibase.BASE16_UPPER:
            return binascii.a2b_hex(payload)
        case Multibase.BASE32 | Multibase.BASE32_UPPER:
            return _base32_decode(payload.upper())
        case Multibase.BASE58_BTC:
            return _base58_decode(payload)
        case Multibase.BASE64:
            return _base64_decode(payload, padded=False, altchars=None)
        case Multibase.BASE64_URL:
            return _base64_decode(payload, padded=False, altchars=b"-_")
        case Multibase.BASE64_URL_PAD:
            return _base64_decode(payload, padded=True, altchars=b"-_")
    raise TypeError(f"not a Multibase encoding: {encoding!r}")


_BY_PREFIX = {encoding.value: encoding for encoding in Multibase}


def decode(text: str) -> tuple[Multibase, bytes]:
    """Decode a multibase string; return its encoding and bytes, or raise ``InvalidText``."""
    if not text:
        raise InvalidText(text, "multibase string", "it is empty")
    encoding = _BY_PREFIX.get(text[0])
    if encoding is None:
        raise InvalidText(text, "multibase string", f"unsupported multibase prefix {text[0]!r}")
    try:
        data = _decode_payload(encoding, text[1:])
    except ValueError as error:
        raise InvalidText(
            text, "multibase string", f"malformed {encoding.name.lower()}: {error}"
        ) from None
    if (
        encoding not in (Multibase.BASE16, Multibase.BASE16_UPPER)
        and encode(data, encoding) != text
    ):
        raise InvalidText(text, "multibase string", f"non-canonical {encoding.name.lower()}")
    return encoding, data
