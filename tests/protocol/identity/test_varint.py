"""Unsigned varints, checked against ``multiformats.varint`` as an independent oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import varint as oracle

from protocol.identity.varint import VarintError, decode_varint, encode_varint


@settings(deadline=None)
@given(st.integers(0, 2**63 - 1), st.binary(max_size=4))
def test_matches_oracle_and_round_trips(value: int, trailer: bytes) -> None:
    encoded = encode_varint(value)
    assert encoded == oracle.encode(value)
    assert decode_varint(encoded + trailer) == (value, len(encoded))


def test_decodes_at_offset() -> None:
    assert decode_varint(b"\xff\xed\x01\x00", 1) == (0xED, 3)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "truncated"),
        (b"\x80", "truncated"),
        (b"\x80\x00", "not minimally encoded"),
        (b"\xed\x81\x00", "not minimally encoded"),
        (b"\xff" * 9 + b"\x01", "longer than 9 bytes"),
    ],
)
def test_rejects_malformed(data: bytes, reason: str) -> None:
    with pytest.raises(VarintError, match=reason):
        decode_varint(data)


@pytest.mark.parametrize("value", [-1, 2**63])
def test_refuses_values_outside_63_bits(value: int) -> None:
    with pytest.raises(VarintError):
        encode_varint(value)
