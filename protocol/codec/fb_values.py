"""Identity values in FlatBuffers: their binary forms, and decoding them failing as ``Invalid``.

A block holds half a dozen hashes, so the binary forms FlatBuffers actually carries (a known
32-byte hash code, an ``ed 01`` key) are recognised by one lookup in the buffer and the value is
built directly through its slots, exactly as the identity type would build it after the same
checks; anything else goes through the identity type's full parser and its error messages.
Encoders write ``MULTIHASH_HEADERS[code] + digest`` and ``DATASET_ID_PREFIX + public_key``, the
identity types' ``to_bytes()``, without building the joined bytes first.
"""

from __future__ import annotations

import inspect
from struct import Struct
from typing import TypeVar

from protocol.codec.fb_reader import Reader
from protocol.codec.invalid import Invalid
from protocol.errors import OdfError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef, Multihash
from protocol.identity.did import ED25519_PUBLIC_KEY_SIZE
from protocol.identity.multicodec import Multicodec
from protocol.identity.multihash import DIGEST_SIZES
from protocol.identity.varint import encode_varint

E = TypeVar("E")

_U32 = Struct("<I").pack
_U32_AT = Struct("<I").unpack_from

MULTIHASH_HEADERS = {
    code: encode_varint(code) + encode_varint(size) for code, size in DIGEST_SIZES.items()
}
"""The binary multihash header (varint code, varint digest length) of every hash code."""
DATASET_ID_PREFIX = encode_varint(Multicodec.ED25519_PUB)
"""What precedes the public key in a dataset id's binary form."""

_DIGEST_SIZE = 32
_HASH_HEADERS = {
    header: code for code, header in MULTIHASH_HEADERS.items() if DIGEST_SIZES[code] == _DIGEST_SIZE
}
_KEY_SIZE = 6


def _vector_keys() -> dict[bytes, tuple[Multicodec, int, bytes]]:
    """The first six bytes of the ``[ubyte]`` vector of each 32-byte hash (length prefix and the
    header's first two bytes) -> (code, vector size, rest of the header); a key two codes share
    is left out (such hashes take the general path)."""
    keys: dict[bytes, tuple[Multicodec, int, bytes]] = {}
    shared = set()
    for header, code in _HASH_HEADERS.items():
        vector_head = _U32(len(header) + _DIGEST_SIZE) + header
        key = vector_head[:_KEY_SIZE]
        if key in keys:
            shared.add(key)
        keys[key] = (code, len(vector_head) + _DIGEST_SIZE, vector_head[_KEY_SIZE:])
    return {key: form for key, form in keys.items() if key not in shared}


_HASH_VECTOR_KEYS = _vector_keys()
_DATASET_ID_SIZE = len(DATASET_ID_PREFIX) + ED25519_PUBLIC_KEY_SIZE
_DATASET_ID_VECTOR = _U32(_DATASET_ID_SIZE) + DATASET_ID_PREFIX

_new = object.__new__
_set_multihash_code = inspect.getattr_static(Multihash, "code").__set__  # the slot's descriptor
_set_multihash_digest = inspect.getattr_static(Multihash, "digest").__set__  # the slot's descriptor
_set_public_key = inspect.getattr_static(DatasetId, "public_key").__set__  # the slot's descriptor


def _multihash_at(r: Reader, pos: int) -> Multihash:
    """The multihash in the ``[ubyte]`` vector referenced at ``pos``."""
    buf = r.buf
    size = r.size
    if pos + 4 <= size:
        vector = pos + _U32_AT(buf, pos)[0]
        form = _HASH_VECTOR_KEYS.get(buf[vector : vector + _KEY_SIZE])
        if form is not None:
            code, length, rest = form
            end = vector + length
            if end <= size and (not rest or buf[vector + _KEY_SIZE : end - _DIGEST_SIZE] == rest):
                value = _new(Multihash)
                _set_multihash_code(value, code)
                _set_multihash_digest(value, buf[end - _DIGEST_SIZE : end])
                return value
    return _multihash(r.bytes(pos))


def _dataset_id_at(r: Reader, pos: int) -> DatasetId:
    """The dataset id in the ``[ubyte]`` vector referenced at ``pos``."""
    buf = r.buf
    size = r.size
    if pos + 4 <= size:
        vector = pos + _U32_AT(buf, pos)[0]
        end = vector + 4 + _DATASET_ID_SIZE
        if end <= size and buf.startswith(_DATASET_ID_VECTOR, vector):
            value = _new(DatasetId)
            _set_public_key(value, buf[end - ED25519_PUBLIC_KEY_SIZE : end])
            return value
    return _dataset_id(r.bytes(pos))


def _multihash(data: bytes) -> Multihash:
    try:
        return Multihash.from_bytes(data)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _dataset_id(data: bytes) -> DatasetId:
    try:
        return DatasetId.from_bytes(data)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _dataset_ref(text: str) -> DatasetRef:
    try:
        return DatasetRef.parse(text)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _dataset_alias(text: str) -> DatasetAlias:
    try:
        return DatasetAlias.parse(text)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _enum(members: tuple[E, ...], value: int) -> E:
    if 0 <= value < len(members):
        return members[value]
    raise Invalid("", f"unknown enum value {value}")
