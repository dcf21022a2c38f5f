"""did:odf and did:key: golden vectors from kamu-cli's test_did_key.rs and test_dataset_id.rs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import VerifyKey

from protocol.errors import DecodeError, ParseError
from protocol.identity import DatasetId, DidKey, Multibase, Multicodec
from protocol.identity.did import _seeded_random_bytes

SEEDED_MULTIHASH_HEX = "fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"
SEEDED_MULTIHASH_B58 = "z6MkggfEoTnRceFGdwjUtm1JaWeHQVKUpttKZUY6KAMaWvqq"
SAMPLE_KEY_B58 = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
SAMPLE_KEY_HEX = "fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"


def test_seeded_prng_matches_rand_xoshiro256plusplus_reference_vector() -> None:
    """rand's own test vector for xoshiro256++ seeded with words 1, 2, 3, 4 (little-endian)."""
    seed = b"".join(word.to_bytes(8, "little") for word in (1, 2, 3, 4))
    expected = [41943041, 58720359, 3588806011781223, 3591011842654386]
    produced = _seeded_random_bytes(seed, 32)
    assert [int.from_bytes(produced[i : i + 8], "little") for i in range(0, 32, 8)] == expected


def test_all_zero_seed_falls_back_to_splitmix_expansion_of_zero() -> None:
    """rand's ``stable_seed_from_u64`` vector: an all-zero seed behaves as ``seed_from_u64(0)``."""
    expected = [5987356902031041503, 7051070477665621255, 6633766593972829180, 211316841551650330]
    for seed in (b"", b"\0" * 32):
        produced = _seeded_random_bytes(seed, 32)
        assert [int.from_bytes(produced[i : i + 8], "little") for i in range(0, 32, 8)] == expected


def test_seed_longer_than_32_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 32 bytes"):
        DatasetId.new_seeded(b"x" * 33)


def test_did_key_seeded_formats() -> None:
    did = DidKey.new_seeded(b"multihash")
    assert repr(did) == f"DidKey(did:key:{SEEDED_MULTIHASH_B58})"
    assert str(did) == f"did:key:{SEEDED_MULTIHASH_B58}"
    assert did.to_multibase() == SEEDED_MULTIHASH_B58
    assert did.to_multibase(Multibase.BASE16) == SEEDED_MULTIHASH_HEX


def test_did_key_string_round_trip() -> None:
    did = DidKey.parse(f"did:key:{SAMPLE_KEY_B58}")
    assert did.key_type is Multicodec.ED25519_PUB
    assert str(did) == f"did:key:{SAMPLE_KEY_B58}"
    assert did.to_did_string(Multibase.BASE16) == f"did:key:{SAMPLE_KEY_HEX}"
    with pytest.raises(ParseError, match="did:key"):
        DidKey.parse("did:key:xASDSAD")


def test_did_key_equality() -> None:
    assert DidKey.parse(f"did:key:{SAMPLE_KEY_B58}") == DidKey.parse(f"did:key:{SAMPLE_KEY_B58}")
    assert DidKey.parse(f"did:key:{SAMPLE_KEY_B58}") != DidKey.parse(
        f"did:key:{SAMPLE_KEY_B58[:-1]}L"
    )


def test_dataset_id_seeded_formats() -> None:
    dataset_id = DatasetId.new_seeded(b"multihash")
    assert repr(dataset_id) == f"DatasetId(did:odf:{SEEDED_MULTIHASH_HEX})"
    assert str(dataset_id) == f"did:odf:{SEEDED_MULTIHASH_HEX}"
    assert dataset_id.to_multibase() == SEEDED_MULTIHASH_HEX


def test_dataset_id_string_round_trip_and_did_key_view() -> None:
    dataset_id = DatasetId.parse(f"did:odf:{SAMPLE_KEY_HEX}")
    assert dataset_id.key_type is Multicodec.ED25519_PUB
    assert str(dataset_id) == f"did:odf:{SAMPLE_KEY_HEX}"
    assert str(dataset_id.as_did_key()) == f"did:key:{SAMPLE_KEY_B58}"
    assert dataset_id.as_did_key().as_dataset_id() == dataset_id


def test_dataset_id_accepts_base58_and_compares_by_key() -> None:
    assert DatasetId.parse(f"did:odf:{SAMPLE_KEY_B58}") == DatasetId.parse(
        f"did:odf:{SAMPLE_KEY_B58}"
    )
    assert DatasetId.parse(f"did:odf:{SAMPLE_KEY_B58}") != DatasetId.parse(
        f"did:odf:{SAMPLE_KEY_B58[:-1]}L"
    )
    assert DatasetId.parse(f"did:odf:{SAMPLE_KEY_B58}") == DatasetId.parse(
        f"did:odf:{SAMPLE_KEY_HEX}"
    )


def test_seeded_key_matches_the_reference_fixture_ids() -> None:
    assert DatasetId.new_seeded(b"key") == DatasetId.parse(
        "did:odf:z6MkmgVreHBu2ABaD59Jq1J2JneXwzpsUWwEWXS4kLhjb4V4"
    )


def test_binary_form_is_multicodec_prefixed_key() -> None:
    dataset_id = DatasetId.new_seeded(b"multihash")
    assert dataset_id.to_bytes() == bytes.fromhex(SEEDED_MULTIHASH_HEX[1:])
    assert dataset_id.to_bytes()[:2] == b"\xed\x01"
    assert DatasetId.from_bytes(dataset_id.to_bytes()) == dataset_id


def test_did_key_and_dataset_id_are_distinct_types() -> None:
    key = DidKey.new_seeded(b"a")
    assert key != DatasetId.new_seeded(b"a")
    assert key.to_bytes() == DatasetId.new_seeded(b"a").to_bytes()


def test_generated_id_is_the_public_key_of_a_working_signing_key() -> None:
    signing_key, dataset_id = DatasetId.new_generated()
    signed = signing_key.sign(b"odf")
    VerifyKey(dataset_id.public_key).verify(signed)
    assert DatasetId.from_public_key(bytes(signing_key.verify_key)) == dataset_id
    assert DatasetId.new_generated()[1] != dataset_id


def test_ordering_is_by_key_bytes() -> None:
    low, high = DatasetId(b"\x01" * 32), DatasetId(b"\x02" * 32)
    assert sorted([high, low]) == [low, high]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "prefix ed01"),
        (b"\xed\x01", "32 bytes, got 0"),
        (b"\xed\x01" + b"\0" * 31, "32 bytes, got 31"),
        (b"\xed\x01" + b"\0" * 33, "32 bytes, got 33"),
        (b"\x12\x20" + b"\0" * 32, "prefix ed01"),
    ],
)
def test_from_bytes_rejects(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        DatasetId.from_bytes(data)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "must start with 'did:odf:'"),
        (f"did:key:{SAMPLE_KEY_B58}", "must start with 'did:odf:'"),
        (f"DID:ODF:{SAMPLE_KEY_HEX}", "must start with 'did:odf:'"),
        ("did:odf:", "empty"),
        ("did:odf:fed01", "32 bytes, got 0"),
        (f"did:odf:{SAMPLE_KEY_HEX}00", "32 bytes, got 33"),
        (f"did:odf:{SAMPLE_KEY_HEX[:-1]}", "malformed base16"),
        (f"did:odf: {SAMPLE_KEY_HEX}", "unsupported multibase prefix"),
        (f"did:odf:{SAMPLE_KEY_HEX} ", "malformed base16"),
        ("did:odf:f" + "ab" * 500, "too long"),
    ],
)
def test_parse_rejects(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        DatasetId.parse(text)


keys = st.binary(min_size=32, max_size=32)


@settings(deadline=None)
@given(keys, st.sampled_from(list(Multibase)))
def test_round_trips_through_bytes_and_every_multibase(key: bytes, encoding: Multibase) -> None:
    dataset_id = DatasetId(key)
    assert DatasetId.from_bytes(dataset_id.to_bytes()) == dataset_id
    assert DatasetId.parse(dataset_id.to_did_string(encoding)) == dataset_id
    assert DatasetId.from_multibase(dataset_id.to_multibase(encoding)) == dataset_id
    assert DatasetId.parse(str(dataset_id)) == dataset_id
    assert DidKey.parse(str(dataset_id.as_did_key())).as_dataset_id() == dataset_id


@settings(deadline=None)
@given(keys, st.sampled_from(list(Multibase)), st.data())
def test_corrupted_text_raises_parse_error_only(
    key: bytes, encoding: Multibase, data: st.DataObject
) -> None:
    text = DatasetId(key).to_did_string(encoding)
    position = data.draw(st.integers(0, len(text)))
    corrupted = text[:position] + data.draw(st.text(min_size=1, max_size=3)) + text[position:]
    try:
        parsed = DatasetId.parse(corrupted)
    except ParseError:
        return
    assert DatasetId.from_bytes(parsed.to_bytes()) == parsed


@settings(deadline=None)
@given(st.binary(max_size=40))
def test_arbitrary_bytes_raise_decode_error_only(data: bytes) -> None:
    try:
        parsed = DatasetId.from_bytes(data)
    except DecodeError:
        return
    assert parsed.to_bytes() == data
