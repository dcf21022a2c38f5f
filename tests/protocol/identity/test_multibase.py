"""Multibase codecs, checked against the ``multiformats`` package as an independent oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import multibase as oracle

from protocol.errors import ParseError
from protocol.identity.multibase import Multibase, decode, encode

ORACLE_NAMES = {
    Multibase.BASE16: "base16",
    Multibase.BASE16_UPPER: "base16upper",
    Multibase.BASE32: "base32",
    Multibase.BASE32_UPPER: "base32upper",
    Multibase.BASE58_BTC: "base58btc",
    Multibase.BASE64: "base64",
    Multibase.BASE64_URL: "base64url",
    Multibase.BASE64_URL_PAD: "base64urlpad",
}


def test_every_final_encoding_of_the_spec_is_supported() -> None:
    final = {encoding.code for encoding in oracle.table() if encoding.status == "final"}
    assert final == {encoding.value for encoding in Multibase}


@settings(deadline=None)
@given(st.binary(max_size=80), st.sampled_from(list(Multibase)))
def test_encoding_matches_oracle_and_round_trips(data: bytes, encoding: Multibase) -> None:
    text = encode(data, encoding)
    assert text == oracle.encode(data, ORACLE_NAMES[encoding])
    assert decode(text) == (encoding, data)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("f68656c6c6f", b"hello"),
        ("F68656C6C6F", b"hello"),
        ("f68656C6c6F", b"hello"),
        ("bnbswy3dp", b"hello"),
        ("BNBSWY3DP", b"hello"),
        ("zCn8eVZg", b"hello"),
        ("z1112", b"\0\0\0\x01"),
        ("maGVsbG8", b"hello"),
        ("uaGVsbG8", b"hello"),
        ("UaGVsbG8=", b"hello"),
        ("u-_8", b"\xfb\xff"),
        ("m+/8", b"\xfb\xff"),
    ],
)
def test_decodes_known_spellings(text: str, expected: bytes) -> None:
    assert decode(text)[1] == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("q68656c6c6f", "unsupported multibase prefix"),
        ("f68656c6c6", "malformed base16"),
        ("f68 656c6c6f", "malformed base16"),
        ("f6865\n6c6c6f", "malformed base16"),
        ("fzz", "malformed base16"),
        ("f\u0661\u0662", "malformed base16"),
        ("bNBSWY3DP", "non-canonical base32"),
        ("Bnbswy3dp", "malformed base32|non-canonical base32"),
        ("bnbur", "non-canonical base32"),
        ("bnbswy3dp=", "malformed base32"),
        ("b1", "malformed base32"),
        ("zCn8eVZ0", "malformed base58_btc"),
        ("zCn8eVZI", "malformed base58_btc"),
        ("maGVsbG8=", "malformed base64"),
        ("maGl", "non-canonical base64"),
        ("m-_8", "malformed base64|non-canonical base64"),
        ("u+/8", "malformed base64_url|non-canonical base64_url"),
        ("UaGVsbG8", "malformed base64_url_pad"),
        ("maGVs bG8", "malformed base64"),
        ("ma", "malformed base64"),
    ],
)
def test_rejects_malformed_and_non_canonical_text(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        decode(text)


@settings(deadline=None)
@given(st.binary(max_size=40), st.sampled_from(list(Multibase)), st.data())
def test_corrupted_text_raises_parse_error_or_decodes_to_its_canonical_self(
    data: bytes, encoding: Multibase, draw: st.DataObject
) -> None:
    text = encode(data, encoding)
    position = draw.draw(st.integers(0, len(text)))
    corrupted = text[:position] + draw.draw(st.text(min_size=1, max_size=2)) + text[position:]
    try:
        decoded_encoding, decoded = decode(corrupted)
    except ParseError:
        return
    if decoded_encoding in (Multibase.BASE16, Multibase.BASE16_UPPER):
        assert encode(decoded, decoded_encoding).lower() == corrupted.lower()
    else:
        assert encode(decoded, decoded_encoding) == corrupted
