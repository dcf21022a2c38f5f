"""Checking a proof of a query answer, as the reference's ``/verify`` does.

A verify request is an answer without its output: ``input``, ``subQueries``, ``commitment`` and
``proof``. ``check_commitment`` does what needs no data, in the reference's order: the input's
hash, the sub-queries' hash, the signature. The caller then re-executes the input at its pinned
blocks (``QueryRequest.to_reproduce``), hashes the output it gets (``protocol.query.response.
output_hash``) and compares (``check_output``); a dataset or block it does not have is
``DatasetNotFound`` / ``DatasetBlockNotFound``. Each outcome has the reference's kind, message
and fields, and a failed check answers 400 with ``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.identity import DatasetId, Multihash
from protocol.query.errors import RequestError, UnsupportedProofTypeError
from protocol.query.json_text import loads
from protocol.query.proof import (
    Commitment,
    Proof,
    ProofType,
    SubQuery,
    json_hash,
    sub_queries_from_json,
)
from protocol.query.request import QueryRequest

_NOT_DISPUTABLE = "The commitment is invalid and cannot be disputed: "


@dataclass(frozen=True, slots=True)
class VerifyRequest:
    input: QueryRequest
    sub_queries: tuple[SubQuery, ...]
    commitment: Commitment
    proof: Proof

    @classmethod
    def from_json_body(cls, body: bytes | str) -> VerifyRequest:
        return cls.from_json(loads(body))

    @classmethod
    def from_json(cls, value: Any) -> VerifyRequest:
        names = ("input", "subQueries", "commitment", "proof")
        if not isinstance(value, dict):
            raise RequestError("", "invalid type, expected struct VerifyRequest")
        for name in value:
            if name not in names:
                known = ", ".join(f"`{known}`" for known in names)
                raise RequestError(name, f"unknown field `{name}`, expected one of {known}")
        for name in names:
            if name not in value:
                raise RequestError("", f"missing field `{name}`")
        return cls(
            QueryRequest.from_json(value["input"], "input"),
            sub_queries_from_json(value["subQueries"], "subQueries"),
            Commitment.from_json(value["commitment"], "commitment"),
            Proof.from_json(value["proof"], "proof"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input.to_json(),
            "subQueries": [query.to_json() for query in self.sub_queries],
            "commitment": self.commitment.to_json(),
            "proof": self.proof.to_json(),
        }

    @classmethod
    def from_answer(cls, answer: Any) -> VerifyRequest:
        """The verify request of a saved answer (a ``/query`` body with a proof): the answer
        without its output."""
        if not isinstance(answer, dict) or "output" not in answer:
            raise RequestError("", "an answer is a JSON object with an `output`")
        return cls.from_json({key: value for key, value in answer.items() if key != "output"})


@dataclass(frozen=True, slots=True)
class ValidationError:
    """Why a proof does not hold; ``to_json`` is the ``error`` of the verify response."""

    KIND: ClassVar[str] = ""
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "message": self.message}


@dataclass(frozen=True, slots=True)
class InputHashMismatch(ValidationError):
    KIND: ClassVar[str] = "InvalidRequest::InputHash"
    message: str = _NOT_DISPUTABLE + "commitment.inputHash doesn't match the hash of input object"


@dataclass(frozen=True, slots=True)
class SubQueriesHashMismatch(ValidationError):
    KIND: ClassVar[str] = "InvalidRequest::SubQueriesHash"
    message: str = (
        _NOT_DISPUTABLE + "commitment.subQueriesHash doesn't match the hash of subQueries object"
    )


@dataclass(frozen=True, slots=True)
class BadSignature(ValidationError):
    KIND: ClassVar[str] = "InvalidRequest::BadSignature"

    @classmethod
    def because(cls, reason: str) -> BadSignature:
        return cls(_NOT_DISPUTABLE + reason)


@dataclass(frozen=True, slots=True)
class OutputMismatch(ValidationError):
    KIND: ClassVar[str] = "VerificationFailed::OutputMismatch"
    expected_hash: Multihash | None = None
    actual_hash: Multihash | None = None

    @classmethod
    def of(cls, expected: Multihash, actual: Multihash) -> OutputMismatch:
        return cls(
            "Query was reproduced but resulted in output hash different from expected. This "
            "means that the output was either falsified, or the query reproducibility was not "
            "guaranteed by the system.",
            expected,
            actual,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "message": self.message,
            "expected_hash": str(self.expected_hash),
            "actual_hash": str(self.actual_hash),
        }


@dataclass(frozen=True, slots=True)
class DatasetNotFound(ValidationError):
    KIND: ClassVar[str] = "VerificationFailed::DatasetNotFound"
    dataset_id: DatasetId | None = None

    @classmethod
    def of(cls, dataset_id: DatasetId) -> DatasetNotFound:
        return cls(
            "Unable to reproduce the query as one of the input datasets cannot be found. The "
            "owner of dataset either deleted it or made private or this node requires "
            "additional configuration in order to locate it.",
            dataset_id,
        )

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "message": self.message, "dataset_id": str(self.dataset_id)}


@dataclass(frozen=True, slots=True)
class DatasetBlockNotFound(ValidationError):
    KIND: ClassVar[str] = "VerificationFailed::DatasetBlockNotFound"
    dataset_id: DatasetId | None = None
    block_hash: Multihash | None = None

    @classmethod
    def of(cls, dataset_id: DatasetId, block_hash: Multihash) -> DatasetBlockNotFound:
        return cls(
            "Unable to reproduce the query as one of the input datasets does not contain a "
            "block with specified hash. Under normal circumstances a block can disappear only "
            "when the owner of dataset performs history-altering operation such as reset or "
            "hard compaction. There is also a probability that block hash was spoofed in the "
            "original request to falsify the results.",
            dataset_id,
            block_hash,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "message": self.message,
            "dataset_id": str(self.dataset_id),
            "block_hash": str(self.block_hash),
        }


@dataclass(frozen=True, slots=True)
class VerifyResponse:
    """The answer of ``/verify``: ``{"ok": true}`` (200) or ``{"ok": false, "error": …}`` (400)."""

    error: ValidationError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def status(self) -> int:
        return 200 if self.error is None else 400

    def to_json(self) -> dict[str, Any]:
        if self.error is None:
            return {"ok": True}
        return {"ok": False, "error": self.error.to_json()}


def check_commitment(request: VerifyRequest) -> ValidationError | None:
    """The checks that need no data, in the reference's order; ``None`` if all hold.

    Raises ``UnsupportedProofTypeError`` for a proof type other than ed25519."""
    if request.proof.type is not ProofType.ED25519_SIGNATURE_2020:
        raise UnsupportedProofTypeError(
            f"proofs of type {request.proof.type.value} cannot be checked by this node"
        )
    if request.commitment.input_hash != json_hash(request.input.to_json()):
        return InputHashMismatch()
    sub_queries = [query.to_json() for query in request.sub_queries]
    if request.commitment.sub_queries_hash != json_hash(sub_queries):
        return SubQueriesHashMismatch()
    reason = request.proof.check(request.commitment)
    if reason is not None:
        return BadSignature.because(reason)
    return None


def check_answer(answer: Any) -> ValidationError | None:
    """Check a saved answer on its own, as a client does before relying on it: the
    commitment and signature, and the hash of the output it carries (taken, like the
    reference's client checks, over the output as read from its JSON text)."""
    request = VerifyRequest.from_answer(answer)
    return check_commitment(request) or check_output(request, json_hash(answer["output"]))


def check_output(request: VerifyRequest, actual: Multihash) -> OutputMismatch | None:
    """Compare the hash of the re-executed output with the committed one."""
    expected = request.commitment.output_hash
    return None if actual == expected else OutputMismatch.of(expected, actual)
