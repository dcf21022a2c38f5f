"""Signed heads: the dataset owner's statement "at time T, my dataset's head is H".

A dataset's ``did:odf`` is an ed25519 public key, so its owner can sign its head and anyone can
check the signature against the dataset id alone. A mirror fed by untrusted peers then tells a
head the owner published from one a peer made up (a fork), an old one (a rollback) or one that
stopped moving (a freeze). ``docs/signed-heads.md`` is the normative description of the format;
this module is its implementation and must stay equal to it.

The signed message is five lines, each ending in ``\\n``, UTF-8::

    odf-signed-head-v1
    <dataset id, canonical did:odf text>
    <head block hash, canonical multibase>
    <head block sequence number, decimal>
    <signing time, canonical RFC 3339 UTC>

The document (the file ``refs/head.sig`` of a dataset) is a JSON object with ``version`` (1),
``datasetId``, ``head``, ``sequenceNumber``, ``signedAt`` (the same texts as in the message) and
``signature`` (the 64-byte ed25519 signature in base16 multibase, ``f`` + 128 lowercase hex).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.errors import DecodeError, ParseError
from protocol.identity import DatasetId, Multibase, Multihash
from protocol.identity import multibase as mb
from protocol.model.timestamp import Timestamp

if TYPE_CHECKING:
    from nacl.signing import SigningKey

SIGNATURE_REF = "head.sig"
"""File name in a dataset's ``refs/`` folder and the sibling path of ``refs/head`` it is served at."""
FORMAT_VERSION = 1
MAGIC = "odf-signed-head-v1"
MAX_DOCUMENT_BYTES = 4096
"""A document is about 400 bytes; anything much longer is refused before parsing."""
_FIELDS = ("version", "datasetId", "head", "sequenceNumber", "signedAt", "signature")


class SignedHeadError(DecodeError):
    """A signed-head document is malformed, or its signature does not verify."""


@dataclass(frozen=True, slots=True)
class SignedHead:
    """A verified (or freshly signed) statement of a dataset's head; ``document`` is its file."""

    dataset_id: DatasetId
    head: Multihash
    sequence_number: int
    signed_at: Timestamp
    signature: bytes

    def message(self) -> bytes:
        """The exact bytes the signature covers."""
        return signed_message(self.dataset_id, self.head, self.sequence_number, self.signed_at)

    def document(self) -> bytes:
        """The JSON document served as ``refs/head.sig`` (keys in a fixed order, no spaces)."""
        value = {
            "version": FORMAT_VERSION,
            "datasetId": str(self.dataset_id),
            "head": self.head.to_multibase(),
            "sequenceNumber": self.sequence_number,
            "signedAt": self.signed_at.to_rfc3339(),
            "signature": mb.encode(self.signature, Multibase.BASE16),
        }
        return json.dumps(value, separators=(",", ":")).encode("utf-8")

    def is_newer_than(self, other: SignedHead) -> bool:
        return self.signed_at.epoch_nanos > other.signed_at.epoch_nanos

    def same_statement(self, other: SignedHead) -> bool:
        return (
            self.dataset_id == other.dataset_id
            and self.head == other.head
            and self.signed_at == other.signed_at
        )


def signed_message(
    dataset_id: DatasetId, head: Multihash, sequence_number: int, signed_at: Timestamp
) -> bytes:
    lines = (MAGIC, str(dataset_id), head.to_multibase(), str(sequence_number), str(signed_at))
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def sign_head(
    key: SigningKey,
    dataset_id: DatasetId,
    head: Multihash,
    sequence_number: int,
    signed_at: Timestamp,
) -> SignedHead:
    """Sign with the dataset's own key; refuses a key that is not the dataset's."""
    if bytes(key.verify_key) != dataset_id.public_key:
        raise SignedHeadError(f"the key given is not the key of dataset {dataset_id}")
    if sequence_number < 0:
        raise SignedHeadError(f"a sequence number is never negative, got {sequence_number}")
    message = signed_message(dataset_id, head, sequence_number, signed_at)
    return SignedHead(dataset_id, head, sequence_number, signed_at, key.sign(message).signature)


def parse_signed_head(data: bytes, where: str) -> SignedHead:
    """Read a document and verify its signature against the dataset id it names.

    ``where`` names the source in errors. Whether that dataset id is the one expected is the
    caller's check: this only proves the owner of the id it names signed it.
    """
    if len(data) > MAX_DOCUMENT_BYTES:
        raise SignedHeadError(f"{where}: signed head is longer than {MAX_DOCUMENT_BYTES} bytes")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise SignedHeadError(f"{where}: signed head is not a JSON document: {err}") from None
    if not isinstance(value, dict):
        raise SignedHeadError(f"{where}: signed head must be a JSON object")
    missing = [name for name in _FIELDS if name not in value]
    if missing:
        raise SignedHeadError(f"{where}: signed head lacks {', '.join(missing)}")
    extra = sorted(set(value) - set(_FIELDS))
    if extra:
        raise SignedHeadError(f"{where}: signed head has unknown fields {', '.join(extra)}")
    if value["version"] != FORMAT_VERSION or isinstance(value["version"], bool):
        raise SignedHeadError(
            f"{where}: signed head version {value['version']!r} is not supported "
            f"(this node reads version {FORMAT_VERSION})"
        )
    dataset_id = _canonical(value, "datasetId", DatasetId.parse, str, where)
    head = _canonical(value, "head", Multihash.from_multibase, Multihash.to_multibase, where)
    signed_at = _canonical(value, "signedAt", Timestamp.parse_rfc3339, Timestamp.to_rfc3339, where)
    sequence_number = value["sequenceNumber"]
    if (
        not isinstance(sequence_number, int)
        or isinstance(sequence_number, bool)
        or sequence_number < 0
    ):
        raise SignedHeadError(f"{where}: sequenceNumber must be an integer >= 0")
    signature = _signature(value["signature"], where)
    message = signed_message(dataset_id, head, sequence_number, signed_at)
    from nacl.exceptions import BadSignatureError  # here: reading datasets needs no nacl
    from nacl.signing import VerifyKey

    try:
        VerifyKey(dataset_id.public_key).verify(message, signature)
    except BadSignatureError:
        raise SignedHeadError(
            f"{where}: the signature of head {head} does not verify against {dataset_id}"
        ) from None
    return SignedHead(dataset_id, head, sequence_number, signed_at, signature)


def _canonical(value: dict[str, Any], name: str, parse: Any, render: Any, where: str) -> Any:
    """Parse a text field and insist it is written canonically (the message is built from it)."""
    text = value[name]
    if not isinstance(text, str):
        raise SignedHeadError(f"{where}: {name} must be a string")
    try:
        parsed = parse(text)
    except (ParseError, DecodeError) as err:
        raise SignedHeadError(f"{where}: {name}: {err}") from None
    if render(parsed) != text:
        raise SignedHeadError(f"{where}: {name} {text!r} is not in canonical form")
    return parsed


def _signature(text: Any, where: str) -> bytes:
    if not isinstance(text, str) or not text.startswith("f") or len(text) != 129:
        raise SignedHeadError(f"{where}: signature must be 'f' and 128 lowercase hex digits")
    try:
        data = bytes.fromhex(text[1:])
    except ValueError:
        raise SignedHeadError(f"{where}: signature is not hex") from None
    if text[1:] != data.hex():
        raise SignedHeadError(f"{where}: signature must be lowercase hex")
    return data
