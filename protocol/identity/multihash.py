"""Multihash: a hash digest tagged with the function that produced it.

ODF names every block, data and checkpoint file by a multihash, and the same values are parsed,
hashed and formatted hundreds of thousands of times during a pull, so the common paths (canonical
base16, binary form) avoid generic machinery.
"""

from __future__ import annotations

import hashlib
from binascii import a2b_hex as _hex_to_bytes
from dataclasses import dataclass

from protocol.errors import DecodeError
from protocol.identity import multibase
from protocol.identity._errors import InvalidText
from protocol.identity.multibase import Multibase
from protocol.identity.multicodec import Multicodec
from protocol.identity.varint import VarintError, decode_varint, encode_varint

DIGEST_SIZES: dict[Multicodec, int] = {
    Multicodec.SHA2_256: 32,
    Multicodec.SHA3_256: 32,
    Multicodec.ARROW0_SHA3_256: 32,
}
"""Hash functions a multihash may name, with their digest sizes."""

_MAX_MULTIBASE_LEN = 128
"""Far above the longest multihash we accept in any final multibase (base16: 1 + 2 * 36)."""

_HEADERS = {code: encode_varint(code) + encode_varint(size) for code, size in DIGEST_SIZES.items()}
_BY_HEADER = {header: code for code, header in _HEADERS.items()}


class _Invalid(Exception):
    """Why bytes are not a multihash; re-raised with context as a typed error."""


def _hash_code(code: int, digest_size: int) -> Multicodec:
    try:
        known = Multicodec(code)
    except ValueError:
        raise _Invalid(f"multicodec {code:#x} is not a supported hash function") from None
    size = DIGEST_SIZES.get(known)
    if size is None:
        raise _Invalid(f"multicodec {known} ({code:#x}) is not a hash function")
    if digest_size != size:
        raise _Invalid(f"a {known} digest has {size} bytes, got {digest_size}")
    return known


@dataclass(frozen=True, slots=True, eq=True, order=False)
class Multihash:
    """A digest and the multicodec of its hash function.

    Ordered like the reference (by digest, then code), so sorted listings match kamu-cli's.
    """

    code: Multicodec
    digest: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.digest, bytes):
            raise TypeError(f"a multihash digest is bytes, got {type(self.digest).__name__}")
        try:
            object.__setattr__(self, "code", _hash_code(self.code, len(self.digest)))
        except _Invalid as error:
            raise DecodeError(f"not a valid multihash: {error}") from None

    @classmethod
    def _trusted(cls, code: Multicodec, digest: bytes) -> Multihash:
        """Build without re-validating; only for a code and digest already checked."""
        value = _new_object(cls)
        _set_code(value, code)
        _set_digest(value, digest)
        return value

    @classmethod
    def from_digest_sha3_256(cls, data: bytes) -> Multihash:
        """Hash ``data`` with SHA3-256."""
        return cls._trusted(Multicodec.SHA3_256, hashlib.sha3_256(data).digest())

    @classmethod
    def from_bytes(cls, data: bytes) -> Multihash:
        """Read the binary form: varint code, varint digest length, digest, nothing after."""
        data = bytes(data)
        try:
            return cls._decode(data)
        except _Invalid as error:
            raise DecodeError(f"bytes {data.hex()!r} are not a valid multihash: {error}") from None

    @classmethod
    def _decode(cls, data: bytes) -> Multihash:
        code = _BY_HEADER.get(data[:2])
        if code is not None and len(data) == 34:
            return cls._trusted(code, data[2:])
        try:
            raw_code, pos = decode_varint(data)
            length, pos = decode_varint(data, pos)
        except VarintError as error:
            raise _Invalid(str(error)) from None
        digest = data[pos:]
        if length != len(digest):
            raise _Invalid(f"header declares a {length}-byte digest but {len(digest)} bytes follow")
        return cls._trusted(_hash_code(raw_code, len(digest)), digest)

    def to_bytes(self) -> bytes:
        """The binary form (varint code, varint length, digest), as FlatBuffers stores it."""
        return _HEADERS[self.code] + self.digest

    @classmethod
    def from_multibase(cls, text: str) -> Multihash:
        """Parse any final multibase encoding of the binary form (canonical: base16 ``f…``)."""
        if len(text) > _MAX_MULTIBASE_LEN:
            raise InvalidText(text, "multihash", "too long")
        try:
            if text[:1] == "f":  # the canonical form: skip the generic multibase dispatch
                data = _hex_to_bytes(text[1:])
            else:
                _, data = multibase.decode(text)
        except InvalidText as error:
            raise InvalidText(text, "multihash", error.reason) from None
        except ValueError as error:
            raise InvalidText(text, "multihash", f"malformed base16: {error}") from None
        try:
            return cls._decode(data)
        except _Invalid as error:
            raise InvalidText(text, "multihash", str(error)) from None

    def to_multibase(self, encoding: Multibase = Multibase.BASE16) -> str:
        """Encode the binary form; base16 (``f1620…``) is the canonical text form."""
        if encoding is Multibase.BASE16:
            return "f" + (_HEADERS[self.code] + self.digest).hex()
        return multibase.encode(self.to_bytes(), encoding)

    def short(self, length: int = 8) -> str:
        """The last ``length`` characters of the canonical form, as the reference shows hashes."""
        return self.to_multibase()[-length:]

    def __str__(self) -> str:
        return "f" + (_HEADERS[self.code] + self.digest).hex()

    def __repr__(self) -> str:
        return f"Multihash<{self.code}>({self})"

    def _order_key(self) -> tuple[bytes, int]:
        return self.digest, self.code

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Multihash):
            return NotImplemented
        return self._order_key() < other._order_key()

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Multihash):
            return NotImplemented
        return self._order_key() <= other._order_key()

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Multihash):
            return NotImplemented
        return self._order_key() > other._order_key()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Multihash):
            return NotImplemented
        return self._order_key() >= other._order_key()


# The hot constructor path writes the slots directly: 2-3x faster than ``object.__setattr__``.
_new_object = object.__new__
_set_code = Multihash.__dict__["code"].__set__
_set_digest = Multihash.__dict__["digest"].__set__
