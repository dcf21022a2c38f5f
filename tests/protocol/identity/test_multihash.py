"""Multihash: golden vectors from kamu-cli's multiformats tests, plus round-trip properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import multihash as mf_multihash

from protocol.errors import DecodeError, ParseError
from protocol.identity import Multibase, Multicodec, Multihash

SHA3_OF_MULTIHASH = "f162008c3792b2a4deed1bd7ea2328fb5de5531eccf0fbfa04a7d800cdc267137c635"
SHA2_VECTOR = "f12209cbc07c3f991725836a3aa2a581ca2029198aa420b9d99bc0e131d9f3e2cbe47"


def test_sha3_256_of_data_formats_as_reference() -> None:
    value = Multihash.from_digest_sha3_256(b"multihash")
    assert value.code is Multicodec.SHA3_256
    assert value.digest == hashlib.sha3_256(b"multihash").digest()
    assert value.to_multibase() == SHA3_OF_MULTIHASH
    assert str(value) == SHA3_OF_MULTIHASH
    assert (
        value.to_multibase(Multibase.BASE58_BTC)
        == "zW1a3CNT52HXiJNniLkWMeev3CPRy9QiNRMWGyTrVNg4hY8"
    )
    assert value.short() == "7137c635"
    assert repr(value) == f"Multihash<sha3-256>({SHA3_OF_MULTIHASH})"


def test_decode_sha2_256_and_reencode_base58() -> None:
    value = Multihash.from_multibase(SHA2_VECTOR)
    assert value.code is Multicodec.SHA2_256
    assert (
        value.to_multibase(Multibase.BASE58_BTC)
        == "zQmYtUc4iTCbbfVSDNKvtQqrfyezPPnFvE33wFmutw9PBBk"
    )
    assert Multihash.from_multibase("zQmYtUc4iTCbbfVSDNKvtQqrfyezPPnFvE33wFmutw9PBBk") == value


def test_equality_ignores_hex_case_but_not_content() -> None:
    assert Multihash.from_multibase(SHA3_OF_MULTIHASH) == Multihash.from_multibase(
        SHA3_OF_MULTIHASH.upper()
    )
    assert Multihash.from_multibase(SHA3_OF_MULTIHASH) != Multihash.from_multibase(SHA2_VECTOR)
    assert hash(Multihash.from_multibase(SHA3_OF_MULTIHASH)) == hash(
        Multihash.from_multibase("F" + SHA3_OF_MULTIHASH[1:].upper())
    )


def test_binary_form_matches_multiformats_package() -> None:
    value = Multihash.from_digest_sha3_256(b"odf")
    assert value.to_bytes() == mf_multihash.wrap(hashlib.sha3_256(b"odf").digest(), "sha3-256")
    assert value.to_bytes()[:2] == b"\x16\x20"


def test_private_arrow_code_uses_multibyte_varint() -> None:
    value = Multihash(Multicodec.ARROW0_SHA3_256, bytes(range(32)))
    assert value.to_bytes()[:5] == bytes([0x96, 0x80, 0xC0, 0x01, 0x20])
    assert str(value).startswith("f9680c00120")
    assert Multihash.from_bytes(value.to_bytes()) == value
    assert Multihash.from_multibase(str(value)) == value


def test_ordering_is_by_digest_then_code() -> None:
    low = Multihash(Multicodec.SHA3_256, b"\x01" * 32)
    high = Multihash(Multicodec.SHA2_256, b"\x02" * 32)
    same_digest_higher_code = Multihash(Multicodec.ARROW0_SHA3_256, b"\x01" * 32)
    assert sorted([high, same_digest_higher_code, low]) == [low, same_digest_higher_code, high]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "truncated"),
        (b"\x16", "truncated"),
        (b"\x16\x20" + b"\0" * 31, "declares a 32-byte digest but 31"),
        (b"\x16\x20" + b"\0" * 33, "declares a 32-byte digest but 33"),
        (b"\x16\x1f" + b"\0" * 31, "has 32 bytes, got 31"),
        (b"\x96\x00\x20" + b"\0" * 32, "not minimally encoded"),
        (b"\x80" * 9 + b"\x01\x20" + b"\0" * 32, "longer than 9 bytes"),
        (b"\x11\x14" + b"\0" * 20, "not a supported hash function"),
        (b"\xed\x01\x20" + b"\0" * 32, "not a hash function"),
    ],
)
def test_from_bytes_rejects(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        Multihash.from_bytes(data)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "f",
        "f1620",
        SHA3_OF_MULTIHASH[:-1],
        SHA3_OF_MULTIHASH + "00",
        SHA3_OF_MULTIHASH[:-1] + "g",
        " " + SHA3_OF_MULTIHASH,
        SHA3_OF_MULTIHASH[:10] + " " + SHA3_OF_MULTIHASH[10:],
        "x" + SHA3_OF_MULTIHASH[1:],
        "zW1a3CNT52HXiJNniLkWMeev3CPRy9QiNRMWGyTrVNg4hY0",
        "f" + "ab" * 200,
        "\U0001f680" + SHA3_OF_MULTIHASH[1:],
    ],
)
def test_from_multibase_rejects(text: str) -> None:
    with pytest.raises(ParseError, match="multihash"):
        Multihash.from_multibase(text)


digests = st.binary(min_size=32, max_size=32)
codes = st.sampled_from([Multicodec.SHA2_256, Multicodec.SHA3_256, Multicodec.ARROW0_SHA3_256])
encodings = st.sampled_from(list(Multibase))


@settings(deadline=None)
@given(codes, digests, encodings)
def test_round_trips_through_bytes_and_every_multibase(
    code: Multicodec, digest: bytes, encoding: Multibase
) -> None:
    value = Multihash(code, digest)
    assert Multihash.from_bytes(value.to_bytes()) == value
    assert Multihash.from_multibase(value.to_multibase(encoding)) == value
    assert Multihash.from_multibase(str(value)) == value


@settings(deadline=None)
@given(codes, digests, st.data())
def test_corrupted_bytes_raise_decode_error_only(
    code: Multicodec, digest: bytes, data: st.DataObject
) -> None:
    encoded = bytearray(Multihash(code, digest).to_bytes())
    cut = data.draw(st.integers(0, len(encoded) - 1))
    mutation = data.draw(st.sampled_from(["truncate", "extend", "flip-header"]))
    if mutation == "truncate":
        corrupted = bytes(encoded[:cut])
    elif mutation == "extend":
        corrupted = bytes(encoded) + data.draw(st.binary(min_size=1, max_size=4))
    else:
        header_len = len(encoded) - 32
        position = data.draw(st.integers(0, header_len - 1))
        encoded[position] ^= data.draw(st.integers(1, 255))
        corrupted = bytes(encoded)
    try:
        decoded = Multihash.from_bytes(corrupted)
    except DecodeError:
        return
    assert decoded.to_bytes() == corrupted


@settings(deadline=None)
@given(codes, digests, encodings, st.data())
def test_corrupted_text_raises_parse_error_only(
    code: Multicodec, digest: bytes, encoding: Multibase, data: st.DataObject
) -> None:
    text = Multihash(code, digest).to_multibase(encoding)
    position = data.draw(st.integers(0, len(text)))
    inserted = data.draw(st.text(min_size=1, max_size=3))
    corrupted = text[:position] + inserted + text[position:]
    try:
        decoded = Multihash.from_multibase(corrupted)
    except ParseError:
        return
    assert Multihash.from_bytes(decoded.to_bytes()) == decoded


@settings(deadline=None)
@given(st.text(max_size=100))
def test_arbitrary_text_raises_parse_error_only(text: str) -> None:
    try:
        parsed = Multihash.from_multibase(text)
    except ParseError:
        return
    assert Multihash.from_bytes(parsed.to_bytes()) == parsed
