"""The reference's published query-proof vectors, restated: odfd's encodings must agree byte for
byte with kamu-cli's api-server (``src/adapter/http/tests/tests/test_data_query.rs`` and the
examples in ``src/adapter/http/src/data/query_handler.rs``).

The reference's harness signs with the key whose seed is 32 bytes of 123, over a dataset
``kamu-server/population`` with rows (city, population) = (A, 100), (B, 200) at offsets 0, 1.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pyarrow as pa
import pytest
from nacl.signing import SigningKey, VerifyKey

from protocol.identity import DatasetId, DidKey, Multihash, Signature
from protocol.query import (
    BadSignature,
    Commitment,
    DatasetBlockNotFound,
    DatasetNotFound,
    DatasetState,
    InputHashMismatch,
    OutputMismatch,
    Proof,
    ProofType,
    QueryRequest,
    QueryResponseWriter,
    ResponseSigner,
    SubQueriesHashMismatch,
    VerifyRequest,
    VerifyResponse,
    check_answer,
    check_commitment,
    check_output,
    json_hash,
    output_hash,
    render_query_response,
)
from protocol.query.canonical_json import canonical_json

KEY = SigningKey(bytes([123] * 32))
DID = "did:key:z6Mko2nqhQ9wYSTS5Giab2j1aHzGnxHimqwmFeEVY8aNsVnN"
DATASET_ID = "did:odf:fed01df230b49615d175307d580c33d6fda61fc7b9aec91df0f5c1a5ebe3b8cbfee02"
HEAD = "f1620efdd11877825ad5f30fce4fb64a130e3d6273ea8fc81d72507c59081cc1d430e"
ALIAS = "kamu-server/population"
QUERY = f'select offset, city, population from "{ALIAS}" order by offset desc'
EMPTY_SUB_QUERIES_HASH = "f1620ca4510738395af1429224dd785675309c344b2b549632e20275c69b15ed1d210"

SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("city", pa.string(), nullable=False),
        pa.field("population", pa.uint64(), nullable=False),
    ]
)
BATCH = pa.record_batch(
    [pa.array([1, 0]), pa.array(["B", "A"]), pa.array([200, 100], pa.uint64())], schema=SCHEMA
)
DATASETS = [DatasetState(DatasetId.parse(DATASET_ID), ALIAS, Multihash.from_multibase(HEAD))]

ROWS = [
    {"city": "B", "offset": 1, "population": 200},
    {"city": "A", "offset": 0, "population": 100},
]


def _arrow_field(name: str, data_type: str) -> dict[str, object]:
    return {
        "data_type": data_type,
        "dict_id": 0,
        "dict_is_ordered": False,
        "metadata": {},
        "name": name,
        "nullable": False,
    }


# test_data_verify_handler: the answer to {"query": QUERY, "include": ["proof"]}
PROOF_ONLY = {
    "input": {
        "include": ["Input", "Proof"],
        "query": QUERY,
        "queryDialect": "SqlDataFusion",
        "dataFormat": "JsonAoS",
        "skip": 0,
        "limit": 100,
        "datasets": [{"alias": ALIAS, "blockHash": HEAD, "id": DATASET_ID}],
    },
    "output": {"data": ROWS, "dataFormat": "JsonAoS"},
    "subQueries": [],
    "commitment": {
        "inputHash": "f1620ef74430b1ad8916e80c148f7a9e8815ca702610a2655971b2f9852f00d5caa31",
        "outputHash": "f1620ff7f5beaf16900218a3ac4aae82cdccf764816986c7c739c716cf7dc03112a2c",
        "subQueriesHash": EMPTY_SUB_QUERIES_HASH,
    },
    "proof": {
        "type": "Ed25519Signature2020",
        "verificationMethod": DID,
        "proofValue": "u43jJXaMAJCmMzZ0SL2HBQloggw5PQzOnG7gCPTZAoJKCtAx-mrhSmqtWna676x3gm09_b0V7_Qb8zcca8nuABg",
    },
}

# test_data_query_handler_success, case 3: {"query": QUERY, "include": ["schema", "proof"]}
# (the test leaves the schema out of its comparison; the hashes pin it down)
WITH_SCHEMA = {
    "input": {
        "include": ["Input", "Proof", "Schema"],
        "query": QUERY,
        "queryDialect": "SqlDataFusion",
        "dataFormat": "JsonAoS",
        "schemaFormat": "ArrowJson",
        "skip": 0,
        "limit": 100,
        "datasets": [{"alias": ALIAS, "blockHash": HEAD, "id": DATASET_ID}],
    },
    "output": {
        "data": ROWS,
        "dataFormat": "JsonAoS",
        "schema": {
            "fields": [
                _arrow_field("offset", "Int64"),
                _arrow_field("city", "Utf8"),
                _arrow_field("population", "UInt64"),
            ],
            "metadata": {},
        },
        "schemaFormat": "ArrowJson",
    },
    "subQueries": [],
    "commitment": {
        "inputHash": "f16207ec84999fec29898a304aab4c4990bff33e455a409c0c2958894ecb87717dc6a",
        "outputHash": "f16208d66e08ce876ba35ce00ea56f02faf83dbc086f877c443e3d493427ccad133f1",
        "subQueriesHash": EMPTY_SUB_QUERIES_HASH,
    },
    "proof": {
        "type": "Ed25519Signature2020",
        "verificationMethod": DID,
        "proofValue": "uu5cFSKBj004FnB-e4dRajWz5q6loJDMMH-2_WwilhJarqBnwm0urFzZKVTk5OYzUMz75sukMjb5u8A--aR5tDg",
    },
}


def _answer(include: list[str]) -> dict[str, object]:
    request = QueryRequest.from_json({"query": QUERY, "include": include})
    body = render_query_response(
        request, datasets=DATASETS, schema=SCHEMA, batches=[BATCH], signer=ResponseSigner(KEY)
    )
    answer: dict[str, object] = json.loads(body)
    return answer


def _verify_request(answer: dict[str, object]) -> VerifyRequest:
    return VerifyRequest.from_json({key: value for key, value in answer.items() if key != "output"})


def test_the_reference_test_key_is_its_did() -> None:
    """test_data_query.rs: the harness key's did:key, as every proof there names it."""
    assert str(ResponseSigner(KEY).did) == DID


@pytest.mark.parametrize(
    ("include", "expected"),
    [(["proof"], PROOF_ONLY), (["schema", "proof"], WITH_SCHEMA)],
    ids=["test_data_verify_handler", "test_data_query_handler_success"],
)
def test_answers_with_proofs_match_the_reference(
    include: list[str], expected: dict[str, object]
) -> None:
    """The same query answered by odfd from the same rows: equal answers, equal hashes,
    equal signatures."""
    assert _answer(include) == expected


def test_answer_without_proof_is_output_only() -> None:
    """test_data_query_handler_success, case 1 (defaults: output only)."""
    assert _answer([]) == {"output": {"data": ROWS, "dataFormat": "JsonAoS"}}


def test_input_and_schema_without_proof() -> None:
    """test_data_query_handler_success, case 2: ``["input", "schema"]``."""
    answer = _answer(["input", "schema"])
    assert answer["input"] == {
        "include": ["Input", "Schema"],
        "query": QUERY,
        "queryDialect": "SqlDataFusion",
        "dataFormat": "JsonAoS",
        "schemaFormat": "ArrowJson",
        "skip": 0,
        "limit": 100,
        "datasets": [{"alias": ALIAS, "blockHash": HEAD, "id": DATASET_ID}],
    }
    assert set(answer) == {"input", "output"}


def test_commitment_hashes_are_of_canonical_json() -> None:
    """test_data_query_handler_success: each commitment hash is the SHA3-256 multihash of the
    canonical JSON of its part, and the proof verifies over the canonical commitment."""
    for answer in (PROOF_ONLY, WITH_SCHEMA):
        commitment = answer["commitment"]
        assert isinstance(commitment, dict)
        assert commitment["inputHash"] == str(json_hash(answer["input"]))
        assert commitment["outputHash"] == str(json_hash(answer["output"]))
        assert commitment["subQueriesHash"] == str(json_hash(answer["subQueries"]))


def test_output_hash_of_reexecution() -> None:
    """/verify re-executes the input without ``include``; the output it hashes is the one
    committed to (with the schema, the schema format brings it back)."""
    for answer in (PROOF_ONLY, WITH_SCHEMA):
        request = _verify_request(answer)
        actual = output_hash(request.input.to_reproduce(), schema=SCHEMA, batches=[BATCH])
        assert check_output(request, actual) is None
        assert str(actual) == answer["commitment"]["outputHash"]  # type: ignore[index]


def test_successful_validation() -> None:
    """test_data_verify_handler: the answer without its output verifies: ``{"ok": true}``."""
    request = _verify_request(PROOF_ONLY)
    assert check_commitment(request) is None
    assert VerifyResponse().to_json() == {"ok": True}


def _tampered(path: tuple[str, ...], value: str, resign: bool = False) -> VerifyRequest:
    answer = json.loads(json.dumps(PROOF_ONLY))
    del answer["output"]
    target = answer
    for key in path[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[path[-1]] = value
    if path[0] == "input":
        answer["commitment"]["inputHash"] = str(json_hash(answer["input"]))
    if resign:
        signature = KEY.sign(canonical_json(answer["commitment"])).signature
        answer["proof"]["proofValue"] = str(Signature(bytes(signature)))
    return VerifyRequest.from_json(answer)


def test_invalid_request_input_hash() -> None:
    """test_data_verify_handler: a tampered input hash."""
    request = _tampered(
        ("commitment", "inputHash"),
        "f1620c3e929e13d3f0f55ce24e7579919e01b356e79b4212a622b4fc2e7b0acb10d0e",
    )
    error = check_commitment(request)
    assert isinstance(error, InputHashMismatch)
    assert VerifyResponse(error).status == 400
    assert VerifyResponse(error).to_json() == {
        "ok": False,
        "error": {
            "kind": "InvalidRequest::InputHash",
            "message": "The commitment is invalid and cannot be disputed: "
            "commitment.inputHash doesn't match the hash of input object",
        },
    }


def test_invalid_request_sub_queries_hash() -> None:
    """test_data_verify_handler: a tampered sub-queries hash."""
    request = _tampered(
        ("commitment", "subQueriesHash"),
        "f1620ca4510738395af1429224dd785675309c344b2b549632e20275c69b15ed1d211",
    )
    error = check_commitment(request)
    assert isinstance(error, SubQueriesHashMismatch)
    assert VerifyResponse(error).to_json() == {
        "ok": False,
        "error": {
            "kind": "InvalidRequest::SubQueriesHash",
            "message": "The commitment is invalid and cannot be disputed: "
            "commitment.subQueriesHash doesn't match the hash of subQueries object",
        },
    }


def test_invalid_request_bad_signature() -> None:
    """test_data_verify_handler: another signature in the proof."""
    request = _tampered(
        ("proof", "proofValue"),
        "uZbm7fFcWc4l6iyvaKe_txdKntL3h3kvsGHOaKIbPV6c42PH1VnSmpYHMopv4TU68syzgoEdcS26AvpkSQb9dBQ",
    )
    error = check_commitment(request)
    assert isinstance(error, BadSignature)
    assert VerifyResponse(error).to_json() == {
        "ok": False,
        "error": {
            "kind": "InvalidRequest::BadSignature",
            "message": "The commitment is invalid and cannot be disputed: "
            "Verification equation was not satisfied",
        },
    }


def test_output_mismatch() -> None:
    """test_data_verify_handler: a faked output hash, signed again by the key: the signature
    holds, the re-executed output does not match."""
    request = _tampered(
        ("commitment", "outputHash"),
        "f1620ff7f5beaf16900218a3ac4aae82cdccf764816986c7c739c716cf7dc03112a2d",
        resign=True,
    )
    assert check_commitment(request) is None
    actual = output_hash(request.input.to_reproduce(), schema=SCHEMA, batches=[BATCH])
    error = check_output(request, actual)
    assert isinstance(error, OutputMismatch)
    assert VerifyResponse(error).to_json() == {
        "ok": False,
        "error": {
            "kind": "VerificationFailed::OutputMismatch",
            "actual_hash": "f1620ff7f5beaf16900218a3ac4aae82cdccf764816986c7c739c716cf7dc03112a2c",
            "expected_hash": "f1620ff7f5beaf16900218a3ac4aae82cdccf764816986c7c739c716cf7dc03112a2d",
            "message": "Query was reproduced but resulted in output hash different from "
            "expected. This means that the output was either falsified, or the query "
            "reproducibility was not guaranteed by the system.",
        },
    }


def test_dataset_not_found() -> None:
    """test_data_verify_handler: the input names a dataset the node lacks (re-signed): the
    commitment holds and the caller reports ``DatasetNotFound`` for the id."""
    missing = DatasetId.new_seeded(b"foo")
    assert str(missing) == (
        "did:odf:fed01666f6fb3b7370000666f6fb3b737000060f6f60600000000895cddbcb7f7b8cc"
    )
    request = _tampered(("input", "datasets", "0", "id"), str(missing), resign=True)
    assert check_commitment(request) is None
    assert request.input.datasets is not None and request.input.datasets[0].id == missing
    assert VerifyResponse(DatasetNotFound.of(missing)).to_json() == {
        "ok": False,
        "error": {
            "kind": "VerificationFailed::DatasetNotFound",
            "dataset_id": str(missing),
            "message": "Unable to reproduce the query as one of the input datasets cannot be "
            "found. The owner of dataset either deleted it or made private or this node "
            "requires additional configuration in order to locate it.",
        },
    }


def test_dataset_block_not_found() -> None:
    """test_data_verify_handler: the input pins a block the dataset lacks (re-signed)."""
    block = Multihash.from_digest_sha3_256(b"foo")
    assert str(block) == "f162076d3bc41c9f588f7fcd0d5bf4718f8f84b1c41b20882703100b9eb9413807c01"
    request = _tampered(("input", "datasets", "0", "blockHash"), str(block), resign=True)
    assert check_commitment(request) is None
    error = DatasetBlockNotFound.of(DatasetId.parse(DATASET_ID), block)
    assert VerifyResponse(error).to_json() == {
        "ok": False,
        "error": {
            "kind": "VerificationFailed::DatasetBlockNotFound",
            "block_hash": str(block),
            "dataset_id": DATASET_ID,
            "message": "Unable to reproduce the query as one of the input datasets does not "
            "contain a block with specified hash. Under normal circumstances a block can "
            "disappear only when the owner of dataset performs history-altering operation "
            "such as reset or hard compaction. There is also a probability that block hash "
            "was spoofed in the original request to falsify the results.",
        },
    }


def test_query_handler_documentation_example_signature() -> None:
    """query_handler.rs documents a verifiable answer; its proof signs its commitment."""
    commitment = Commitment(
        Multihash.from_multibase(
            "f1620e23f7d8cdde7504eadb86f3cdf34b3b1a7d71f10fe5b54b528dd803387422efc"
        ),
        Multihash.from_multibase(
            "f1620e91f4d3fa26bc4ca0c49d681c8b630550239b64d3cbcfd7c6c2d6ff45998b088"
        ),
        Multihash.from_multibase(EMPTY_SUB_QUERIES_HASH),
    )
    proof = Proof(
        ProofType.ED25519_SIGNATURE_2020,
        DidKey.parse("did:key:z6MkkhJQPHpA41mTPLFgBeygnjeeADUSwuGDoF9pbGQsfwZp"),
        Signature.from_multibase(
            "uJfY3_g03WbmqlQG8TL-WUxKYU8ZoJaP14MzOzbnJedNiu7jpoKnCTNnDI3TYuaXv89vKlirlGs-5AN06mBseCg"
        ),
    )
    assert proof.check(commitment) is None
    other = Commitment(commitment.output_hash, commitment.input_hash, commitment.sub_queries_hash)
    assert proof.check(other) == "Verification equation was not satisfied"


def test_any_did_key_is_accepted() -> None:
    """A proof by any key verifies (the reference's is not special): odfd's own node key."""
    signer = ResponseSigner(SigningKey.generate())
    request = QueryRequest.from_json({"query": QUERY, "include": ["proof"]})
    writer = QueryResponseWriter(request, datasets=DATASETS, schema=SCHEMA, signer=signer)
    answer = json.loads(b"".join(bytes(chunk) for chunk in writer.chunks([BATCH])))
    assert writer.signed is not None and writer.signed.proof.verification_method == signer.did
    assert check_commitment(_verify_request(answer)) is None


def _independent_canonical(value: object) -> bytes:
    """Canonical JSON for values without floats, straight from the standard library."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def test_independent_verifier_accepts_an_odfd_proof() -> None:
    """A few lines that know nothing of odfd check an odfd answer: hashes of the canonical JSON
    of each part (sha3-256 as a multihash: 0x16, 0x20, digest, in base16 multibase) and the
    ed25519 signature over the canonical commitment, by the did:key's public key."""
    answer = _answer(["schema", "proof"])

    def multihash(value: object) -> str:
        return "f1620" + hashlib.sha3_256(_independent_canonical(value)).hexdigest()

    commitment = answer["commitment"]
    assert isinstance(commitment, dict)
    assert commitment["inputHash"] == multihash(answer["input"])
    assert commitment["outputHash"] == multihash(answer["output"])
    assert commitment["subQueriesHash"] == multihash(answer["subQueries"])
    proof = answer["proof"]
    assert isinstance(proof, dict)
    method = proof["verificationMethod"]
    assert method.startswith("did:key:z")
    public_key = _base58_decode(method[len("did:key:z") :])[2:]  # skip the ed25519-pub varint
    value = proof["proofValue"]
    assert value.startswith("u")
    signature = base64.urlsafe_b64decode(value[1:] + "=" * (-len(value[1:]) % 4))
    VerifyKey(public_key).verify(_independent_canonical(commitment), signature)


def _base58_decode(text: str) -> bytes:
    alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    number = 0
    for char in text:
        number = number * 58 + alphabet.index(char)
    return number.to_bytes((number.bit_length() + 7) // 8, "big")


def test_saved_answers_are_checked_on_their_own() -> None:
    """A client holding an answer checks its hashes and signature without any node (the steps
    test_data_query_handler_success takes after receiving one)."""
    assert check_answer(PROOF_ONLY) is None
    assert check_answer(WITH_SCHEMA) is None
    forged = json.loads(json.dumps(PROOF_ONLY))
    forged["output"]["data"][0]["population"] = 201
    assert isinstance(check_answer(forged), OutputMismatch)
    forged = json.loads(json.dumps(PROOF_ONLY))
    forged["input"]["limit"] = 1
    assert isinstance(check_answer(forged), InputHashMismatch)
