"""Answers streamed by QueryResponseWriter: errors come before any byte, proofs need a key."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from nacl.signing import SigningKey

from protocol.query import (
    DataTooLargeError,
    QueryRequest,
    QueryResponseWriter,
    RenderError,
    ResponseSigner,
    ResponseSigningNotConfigured,
)

SCHEMA = pa.schema([pa.field("x", pa.int64())])


def _batches(count: int) -> list[pa.RecordBatch]:
    return [pa.record_batch([pa.array(range(1000))], schema=SCHEMA) for _ in range(count)]


def test_a_proof_needs_the_node_key_and_nothing_else_does() -> None:
    """Unlike the reference, a node without a key answers queries that ask for no proof."""
    with pytest.raises(ResponseSigningNotConfigured, match="not enabled by the node operator"):
        QueryResponseWriter(
            QueryRequest.from_json({"query": "q", "include": ["proof"]}), datasets=[], schema=SCHEMA
        )
    writer = QueryResponseWriter(QueryRequest("q"), datasets=[], schema=SCHEMA)
    answer = json.loads(b"".join(bytes(chunk) for chunk in writer.chunks(_batches(1))))
    assert answer["output"]["data"][:2] == [{"x": 0}, {"x": 1}]


def test_rendering_errors_come_before_any_byte() -> None:
    schema = pa.schema([pa.field("u", pa.dense_union([pa.field("a", pa.int8())]))])
    union = pa.UnionArray.from_dense(
        pa.array([0], pa.int8()), pa.array([0], pa.int32()), [pa.array([1], pa.int8())], ["a"]
    )
    writer = QueryResponseWriter(QueryRequest("q"), datasets=[], schema=schema)
    chunks = writer.chunks([pa.record_batch([union], schema=schema)])
    with pytest.raises(RenderError, match="cannot be written as JSON"):
        next(chunks)


def test_json_soa_over_its_cap_fails_before_any_byte() -> None:
    request = QueryRequest.from_json({"query": "q", "dataFormat": "JsonSoA"})
    writer = QueryResponseWriter(request, datasets=[], schema=SCHEMA, soa_limit=10_000)
    with pytest.raises(DataTooLargeError):
        next(writer.chunks(_batches(5)))


def test_streamed_body_is_one_json_document_with_the_proof_last() -> None:
    request = QueryRequest.from_json({"query": "q", "include": ["proof"], "dataFormat": "JsonAoA"})
    writer = QueryResponseWriter(
        request, datasets=[], schema=SCHEMA, signer=ResponseSigner(SigningKey.generate())
    )
    chunks = list(writer.chunks(_batches(3)))
    assert len(chunks) > 3
    answer = json.loads(b"".join(bytes(chunk) for chunk in chunks))
    assert list(answer) == ["input", "output", "subQueries", "commitment", "proof"]
    assert len(answer["output"]["data"]) == 3000
    assert writer.signed is not None
    assert answer["commitment"] == writer.signed.commitment.to_json()
