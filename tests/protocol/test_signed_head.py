"""The signed-head document (docs/signed-heads.md): exact signed bytes, round trip, and every way a
document can be wrong."""

from __future__ import annotations

import json

import pytest
from nacl.signing import SigningKey

from protocol.identity import DatasetId, Multihash
from protocol.model.timestamp import Timestamp
from protocol.transfer.signed_head import (
    SignedHeadError,
    parse_signed_head,
    sign_head,
    signed_message,
)

KEY = SigningKey(bytes(range(32)))
DATASET = DatasetId.from_public_key(bytes(KEY.verify_key))
HEAD = Multihash.from_digest_sha3_256(b"block")
AT = Timestamp.of(2026, 1, 2, 3, 4, 5, 123_000_000)


def test_signed_message_is_five_canonical_lines() -> None:
    message = signed_message(DATASET, HEAD, 7, AT)
    assert (
        message
        == (
            f"odf-signed-head-v1\n{DATASET}\n{HEAD.to_multibase()}\n7\n2026-01-02T03:04:05.123Z\n"
        ).encode()
    )
    assert str(DATASET).startswith("did:odf:fed01") and HEAD.to_multibase().startswith("f1620")


def test_round_trip_and_document_form() -> None:
    signed = sign_head(KEY, DATASET, HEAD, 7, AT)
    document = signed.document()
    value = json.loads(document)
    assert list(value) == [
        "version",
        "datasetId",
        "head",
        "sequenceNumber",
        "signedAt",
        "signature",
    ]
    assert value["signature"].startswith("f") and len(value["signature"]) == 129
    # ed25519 is deterministic: the same statement gives the same bytes.
    assert sign_head(KEY, DATASET, HEAD, 7, AT).document() == document
    back = parse_signed_head(document, "test")
    assert back == signed and back.message() == signed_message(DATASET, HEAD, 7, AT)


def test_signing_with_another_key_is_refused() -> None:
    with pytest.raises(SignedHeadError, match="not the key of dataset"):
        sign_head(SigningKey.generate(), DATASET, HEAD, 1, AT)


def _tampered(**changes: object) -> bytes:
    value = json.loads(sign_head(KEY, DATASET, HEAD, 7, AT).document())
    value.update(changes)
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_tampered(sequenceNumber=8), "does not verify"),
        (
            _tampered(head=Multihash.from_digest_sha3_256(b"other").to_multibase()),
            "does not verify",
        ),
        (_tampered(signedAt="2026-01-02T03:04:05.124Z"), "does not verify"),
        (_tampered(signedAt="2026-01-02T03:04:05.123000Z"), "not in canonical form"),
        (_tampered(signedAt="2026-01-02T04:04:05.123+01:00"), "not in canonical form"),
        (_tampered(datasetId=str(DatasetId.new_generated()[1])), "does not verify"),
        (_tampered(version=2), "version 2 is not supported"),
        (_tampered(sequenceNumber=-1), "sequenceNumber must be an integer"),
        (_tampered(sequenceNumber=True), "sequenceNumber must be an integer"),
        (_tampered(signature="f00"), "signature must be"),
        (_tampered(extra=1), "unknown fields extra"),
        (b"[1]", "must be a JSON object"),
        (b"\xff", "not a JSON document"),
        (b" " * 5000, "longer than 4096 bytes"),
    ],
)
def test_bad_documents_are_refused(document: bytes, message: str) -> None:
    with pytest.raises(SignedHeadError, match=message):
        parse_signed_head(document, "peer")


def test_uppercase_signature_is_not_canonical() -> None:
    value = json.loads(sign_head(KEY, DATASET, HEAD, 7, AT).document())
    value["signature"] = "f" + value["signature"][1:].upper()
    with pytest.raises(SignedHeadError, match="lowercase"):
        parse_signed_head(json.dumps(value).encode(), "peer")


def test_missing_field_is_named() -> None:
    value = json.loads(sign_head(KEY, DATASET, HEAD, 7, AT).document())
    del value["head"]
    with pytest.raises(SignedHeadError, match="lacks head"):
        parse_signed_head(json.dumps(value).encode(), "peer")


def test_the_documented_vector() -> None:
    """docs/signed-heads.md's test vector, byte for byte."""
    document = (
        b'{"version":1,"datasetId":"did:odf:fed0103a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5'
        b'f1ddc8664125531b8","head":"f1620aa25218b880fcbadda1b5855287f2aab7dce851a0c70698fbc066a8'
        b'48447f9a6","sequenceNumber":7,"signedAt":"2026-01-02T03:04:05.123Z","signature":"f242c'
        b"e5ffe48f903110c1f06e59969524fc83e10e97a150fe00ae1c38a714b48b802013f4af8fd492bc36ca2034e"
        b'07b172ec150cca384769fbc2af39b86252f01"}'
    )
    assert sign_head(KEY, DATASET, HEAD, 7, AT).document() == document
    assert parse_signed_head(document, "vector").message() == (
        b"odf-signed-head-v1\n"
        b"did:odf:fed0103a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8\n"
        b"f1620aa25218b880fcbadda1b5855287f2aab7dce851a0c70698fbc066a848447f9a6\n"
        b"7\n"
        b"2026-01-02T03:04:05.123Z\n"
    )
