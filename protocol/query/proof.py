"""Commitments and proofs of query answers, byte-compatible with the reference.

A signed answer carries a commitment: the SHA3-256 multihashes of the canonical JSON
(``protocol.query.canonical_json``) of its ``input``, its ``output`` and its ``subQueries``; and a
proof: an ed25519 signature over the canonical JSON of the commitment, with the signer's
``did:key`` as verification method and the signature as ``u`` + base64url. Anyone holding the
answer can check the hashes and the signature without the node; re-executing the input at the
pinned blocks checks the output (``protocol.query.verify``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from protocol.errors import ParseError
from protocol.identity import DidKey, Multihash, Signature
from protocol.query.canonical_json import canonical_json
from protocol.query.errors import QueryProtocolError, RequestError
from protocol.query.request import QueryRequest

if TYPE_CHECKING:
    from nacl.signing import SigningKey

_GROUP_ORDER = 2**252 + 27742317777372353535851937790883648493
"""The order of ed25519's base point: a signature's ``s`` must be below it."""


class ProofType(StrEnum):
    ED25519_SIGNATURE_2020 = "Ed25519Signature2020"
    ECDSA_SECP256K1_SIGNATURE_2019 = "EcdsaSecp256k1Signature2019"


class ResponseSigningNotConfigured(QueryProtocolError):
    """A proof was asked of a node that has no identity key."""

    def __init__(self) -> None:
        super().__init__("Response signing is not enabled by the node operator")


def json_hash(value: Any) -> Multihash:
    """The SHA3-256 multihash of a JSON value's canonical bytes."""
    return Multihash.from_digest_sha3_256(canonical_json(value))


@dataclass(frozen=True, slots=True)
class Commitment:
    input_hash: Multihash
    output_hash: Multihash
    sub_queries_hash: Multihash

    @classmethod
    def of(cls, input_value: Any, output_hash: Multihash, sub_queries: Any) -> Commitment:
        """Commit to an input and sub-queries (JSON values) and an output's hash."""
        return cls(json_hash(input_value), output_hash, json_hash(sub_queries))

    def to_json(self) -> dict[str, Any]:
        return {
            "inputHash": str(self.input_hash),
            "outputHash": str(self.output_hash),
            "subQueriesHash": str(self.sub_queries_hash),
        }

    def canonical(self) -> bytes:
        """The bytes a proof signs."""
        return canonical_json(self.to_json())

    @classmethod
    def from_json(cls, value: Any, where: str) -> Commitment:
        names = ("inputHash", "outputHash", "subQueriesHash")
        fields = _fields(value, where, "struct Commitment", names)
        return cls(*(_multihash(fields, name, where) for name in names))


@dataclass(frozen=True, slots=True)
class Proof:
    type: ProofType
    verification_method: DidKey
    proof_value: Signature

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "verificationMethod": str(self.verification_method),
            "proofValue": str(self.proof_value),
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> Proof:
        names = ("type", "verificationMethod", "proofValue")
        fields = _fields(value, where, "struct Proof", names)
        kind = _text(fields, "type", where)
        if kind not in ProofType.__members__.values():
            expected = ", ".join(f"`{member.value}`" for member in ProofType)
            raise RequestError(
                _at(where, "type"), f"unknown variant `{kind}`, expected one of {expected}"
            )
        method = _text(fields, "verificationMethod", where)
        signature = _text(fields, "proofValue", where)
        try:
            did = DidKey.parse(method)
        except ParseError as error:
            raise RequestError(_at(where, "verificationMethod"), str(error)) from None
        try:
            proof_value = Signature.from_multibase(signature)
        except ParseError as error:
            raise RequestError(_at(where, "proofValue"), str(error)) from None
        return cls(ProofType(kind), did, proof_value)

    def check(self, commitment: Commitment) -> str | None:
        """``None`` if the signature holds, else why not (in the reference's words)."""
        from nacl.exceptions import BadSignatureError
        from nacl.signing import VerifyKey

        data = self.proof_value.data
        if int.from_bytes(data[32:], "little") >= _GROUP_ORDER:
            return "Cannot use scalar with high-bit set"
        try:
            VerifyKey(self.verification_method.public_key).verify(commitment.canonical(), data)
        except (BadSignatureError, ValueError):
            return "Verification equation was not satisfied"
        return None


@dataclass(frozen=True, slots=True)
class SubQuery:
    """Work another node did for an answer: its input, its own sub-queries, commitment and
    proof (odfd answers from its own data and never has any; it reads and checks them)."""

    input: QueryRequest
    sub_queries: tuple[SubQuery, ...]
    commitment: Commitment
    proof: Proof

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input.to_json(),
            "subQueries": [query.to_json() for query in self.sub_queries],
            "commitment": self.commitment.to_json(),
            "proof": self.proof.to_json(),
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> SubQuery:
        names = ("input", "subQueries", "commitment", "proof")
        fields = _fields(value, where, "struct SubQuery", names)
        for name in names:
            if name not in fields:
                raise RequestError(where, f"missing field `{name}`")
        return cls(
            QueryRequest.from_json(fields["input"], _at(where, "input")),
            sub_queries_from_json(fields["subQueries"], _at(where, "subQueries")),
            Commitment.from_json(fields["commitment"], _at(where, "commitment")),
            Proof.from_json(fields["proof"], _at(where, "proof")),
        )


def sub_queries_from_json(value: Any, where: str) -> tuple[SubQuery, ...]:
    if not isinstance(value, list):
        raise RequestError(where, "invalid type, expected a sequence")
    return tuple(SubQuery.from_json(item, f"{where}[{index}]") for index, item in enumerate(value))


class ResponseSigner:
    """Signs answers with a node's ed25519 identity key."""

    def __init__(self, key: SigningKey) -> None:
        self._key = key
        self.did = DidKey(bytes(key.verify_key))

    def sign(self, commitment: Commitment) -> Proof:
        signature = self._key.sign(commitment.canonical()).signature
        return Proof(ProofType.ED25519_SIGNATURE_2020, self.did, Signature(bytes(signature)))


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _fields(value: Any, where: str, expected: str, names: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(where, f"invalid type, expected {expected}")
    for name in value:
        if name not in names:
            known = ", ".join(f"`{known}`" for known in names)
            raise RequestError(_at(where, name), f"unknown field `{name}`, expected one of {known}")
    return value


def _text(fields: dict[str, Any], name: str, where: str) -> str:
    if name not in fields:
        raise RequestError(where, f"missing field `{name}`")
    value = fields[name]
    if not isinstance(value, str):
        raise RequestError(_at(where, name), "invalid type, expected a string")
    return value


def _multihash(fields: dict[str, Any], name: str, where: str) -> Multihash:
    text = _text(fields, name, where)
    try:
        return Multihash.from_multibase(text)
    except ParseError as error:
        raise RequestError(_at(where, name), str(error)) from None
