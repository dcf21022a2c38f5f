"""IPNS names and records of datasets: a dataset's DID and its IPNS name are the same ed25519
public key, so the name of every dataset is computable from its DID, and the record the name
resolves to is checked here, by odfd, against that key (a node's resolver is not trusted).

An IPNS record (``IpnsEntry``, https://specs.ipfs.tech/ipns/ipns-record/) is a protobuf whose
field 9 (``data``) is a DAG-CBOR map of ``Value``, ``Validity``, ``ValidityType``, ``Sequence``
and ``TTL``, signed (field 8, ``signatureV2``) over ``b"ipns-signature:" + data``. Only the signed
``data`` is read: the unsigned protobuf copies of its fields are ignored, as the specification
recommends. The protobuf messages are declared for the protobuf runtime; the signed data is read
by a small DAG-CBOR reader of just what it holds (unsigned integers, byte and text strings, one
map); anything else is a malformed record.

The private key leaves odfd for the IPFS node only to publish (``export_libp2p_key``): Kubo imports
the cleartext libp2p protobuf, js-ipfs its AES-GCM-encrypted form (``cryptography`` encrypts).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from protocol.identity import DatasetId
from storage.errors import StorageError
from storage.ipns_name import IpnsName, ipns_name_of

SIGNATURE_PREFIX = b"ipns-signature:"
_ED25519 = 1  # libp2p KeyType
_VALUE_FIELD, _VALIDITY_FIELD, _SIGNATURE_V2_FIELD, _DATA_FIELD = 1, 4, 8, 9
_EOL = 0
# js-ipfs's key import (@libp2p/crypto's aes-gcm defaults): PBKDF2-SHA256, AES-128-GCM.
_PBKDF2_ITERATIONS = 32767
_AES_KEY_BYTES, _SALT_BYTES, _NONCE_BYTES = 16, 16, 12


class IpnsRecordError(StorageError):
    """An IPNS record that must not be followed: malformed, signed by another key, or expired."""


@dataclass(frozen=True, slots=True)
class IpnsRecord:
    """The signed content of a verified record."""

    value: str
    """What the name points at (``/ipfs/<cid>``)."""
    validity: datetime
    sequence: int
    ttl_ns: int


def verify_record(raw: bytes, dataset_id: DatasetId, now: datetime | None = None) -> IpnsRecord:
    """The record ``raw``, checked against ``dataset_id``'s key and the clock: a signature by
    any other key, an expired validity or a malformed record raise ``IpnsRecordError``."""
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    name = ipns_name_of(dataset_id)
    entry: Any = _CLASSES["IpnsEntry"]()
    try:
        entry.ParseFromString(raw)
    except DecodeError as err:
        raise IpnsRecordError(f"IPNS record for {name} is malformed: {err}") from None
    if not entry.HasField("signatureV2") or not entry.HasField("data"):
        raise IpnsRecordError(f"IPNS record for {name} has no V2 signature (signatureV2, data)")
    try:
        VerifyKey(dataset_id.public_key).verify(SIGNATURE_PREFIX + entry.data, entry.signatureV2)
    except BadSignatureError:
        raise IpnsRecordError(
            f"IPNS record for {name} is not signed by {dataset_id} (signed by another key)"
        ) from None
    signed = _cbor_map(entry.data, name)
    if signed.get("ValidityType") != _EOL:
        raise IpnsRecordError(f"IPNS record for {name} has an unknown validity type")
    value, validity = signed.get("Value"), signed.get("Validity")
    if not isinstance(value, bytes) or not isinstance(validity, bytes):
        raise IpnsRecordError(f"IPNS record for {name} lacks a signed Value or Validity")
    expires = _parse_rfc3339(validity, name)
    if expires <= (now or datetime.now(UTC)):
        raise IpnsRecordError(
            f"IPNS record for {name} expired at {expires.isoformat(timespec='seconds')}"
        )
    sequence, ttl = signed.get("Sequence", 0), signed.get("TTL", 0)
    if not isinstance(sequence, int) or not isinstance(ttl, int):
        raise IpnsRecordError(f"IPNS record for {name} has a malformed Sequence or TTL")
    return IpnsRecord(value.decode("utf-8", "replace"), expires, sequence, ttl)


def record_cid(record: IpnsRecord, name: IpnsName) -> str:
    """The CID a record points at; ``IpnsRecordError`` for anything but ``/ipfs/<cid>``."""
    parts = record.value.strip("/").split("/")
    if len(parts) != 2 or parts[0] != "ipfs":
        raise IpnsRecordError(f"IPNS record for {name} points at {record.value}, not /ipfs/<cid>")
    return parts[1]


def export_libp2p_key(seed: bytes, public_key: bytes) -> bytes:
    """The libp2p ``PrivateKey`` protobuf of an ed25519 key (Kubo's cleartext import format)."""
    return _encode("PrivateKey", Type=_ED25519, Data=seed + public_key)


def encrypt_libp2p_key(key: bytes, password: str) -> str:
    """``key`` (``export_libp2p_key``) in js-ipfs's import form: multibase base64 of salt, nonce
    and the AES-GCM ciphertext under a PBKDF2 key."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    salt, nonce = os.urandom(_SALT_BYTES), os.urandom(_NONCE_BYTES)
    kdf = PBKDF2HMAC(hashes.SHA256(), _AES_KEY_BYTES, salt, _PBKDF2_ITERATIONS)
    sealed = AESGCM(kdf.derive(password.encode())).encrypt(nonce, key, None)
    return "m" + base64.b64encode(salt + nonce + sealed).decode("ascii").rstrip("=")


def encode_record(seed: bytes, value: str, validity: datetime, sequence: int, ttl_ns: int) -> bytes:
    """A V2-signed record (what a node publishes), for tests that need records a node would
    refuse to make (expired, pointing elsewhere)."""
    from nacl.signing import SigningKey

    stamp = validity.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z").encode()
    data = _cbor_encode_map(
        {
            "TTL": ttl_ns,
            "Value": value.encode(),
            "Sequence": sequence,
            "Validity": stamp,
            "ValidityType": _EOL,
        }
    )
    signature = SigningKey(seed).sign(SIGNATURE_PREFIX + data).signature
    return _encode(
        "IpnsEntry", value=value.encode(), validity=stamp, signatureV2=signature, data=data
    )


def _parse_rfc3339(text: bytes, name: IpnsName) -> datetime:
    try:
        stamp = text.decode("ascii").rstrip("Z")
        whole, _, fraction = stamp.partition(".")
        parsed = datetime.fromisoformat(whole + (f".{fraction[:6]}" if fraction else ""))
    except (UnicodeDecodeError, ValueError):
        raise IpnsRecordError(f"IPNS record for {name} has a malformed Validity {text!r}") from None
    return parsed.replace(tzinfo=UTC)


# --- the protobuf messages, declared for the protobuf runtime (as odfd.flight_sql.messages) ---

_PACKAGE = "odfd.ipns"
_F = descriptor_pb2.FieldDescriptorProto
_MESSAGES: dict[str, tuple[tuple[str, int, int], ...]] = {
    # https://specs.ipfs.tech/ipns/ipns-record/ (the fields odfd reads or writes)
    "IpnsEntry": (
        ("value", _VALUE_FIELD, _F.TYPE_BYTES),
        ("validity", _VALIDITY_FIELD, _F.TYPE_BYTES),
        ("signatureV2", _SIGNATURE_V2_FIELD, _F.TYPE_BYTES),
        ("data", _DATA_FIELD, _F.TYPE_BYTES),
    ),
    # libp2p's private key message (the KeyType enum is a varint, as uint32 is on the wire;
    # the public key's is written by storage.ipns_name)
    "PrivateKey": (("Type", 1, _F.TYPE_UINT32), ("Data", 2, _F.TYPE_BYTES)),
}


def _message_classes() -> dict[str, type[Message]]:
    file = descriptor_pb2.FileDescriptorProto(
        name="storage/ipns_record.proto", package=_PACKAGE, syntax="proto2"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind in fields:
            message.field.add(name=field_name, number=number, type=kind, label=_F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _message_classes()


def _encode(name: str, **fields: Any) -> bytes:
    return bytes(_CLASSES[name](**fields).SerializeToString(deterministic=True))


# --- the DAG-CBOR subset of a record's signed data ---


def _cbor_map(data: bytes, name: IpnsName) -> dict[str, object]:
    try:
        value, end = _cbor_item(data, 0)
    except (IndexError, ValueError):
        raise IpnsRecordError(f"IPNS record for {name} has malformed signed data") from None
    if not isinstance(value, dict) or end != len(data):
        raise IpnsRecordError(f"IPNS record for {name}: signed data is not one CBOR map")
    return value


def _cbor_item(data: bytes, at: int) -> tuple[object, int]:
    major, info = data[at] >> 5, data[at] & 0x1F
    at += 1
    if info < 24:
        argument = info
    elif info <= 27:
        size = 1 << (info - 24)
        argument, at = int.from_bytes(data[at : at + size], "big"), at + size
    else:
        raise ValueError(f"CBOR additional information {info}")
    if major == 0:
        return argument, at
    if major in (2, 3):
        chunk = data[at : at + argument]
        if len(chunk) != argument:
            raise ValueError("truncated CBOR string")
        return (chunk if major == 2 else chunk.decode("utf-8")), at + argument
    if major == 5:
        items: dict[str, object] = {}
        for _ in range(argument):
            key, at = _cbor_item(data, at)
            items[str(key)], at = _cbor_item(data, at)
        return items, at
    raise ValueError(f"CBOR major type {major}")


def _cbor_head(major: int, argument: int) -> bytes:
    if argument < 24:
        return bytes([major << 5 | argument])
    size = next(s for s in (1, 2, 4, 8) if argument < 1 << (8 * s))
    return bytes([major << 5 | (24 + size.bit_length() - 1)]) + argument.to_bytes(size, "big")


def _cbor_encode_map(items: dict[str, int | bytes]) -> bytes:
    # DAG-CBOR orders keys by length, then bytewise.
    out = _cbor_head(5, len(items))
    for key in sorted(items, key=lambda k: (len(k), k)):
        out += _cbor_head(3, len(key)) + key.encode()
        value = items[key]
        out += _cbor_head(0, value) if isinstance(value, int) else _cbor_head(2, len(value)) + value
    return out
