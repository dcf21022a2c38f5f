"""Answers streamed by QueryResponseWriter: errors come before any byte, proofs need a key."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

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
from protocol.query.render.ordered import in_order

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


@pytest.mark.parametrize("data_format", ["JsonAoS", "JsonAoA", "JsonSoA"])
def test_chunks_rendered_in_worker_threads_give_the_same_bytes_and_proof(
    data_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Successive chunks rendered at once in a pool are placed in order: the body, the
    canonical output's hash and so the commitment are those of rendering one at a time."""
    monkeypatch.setattr("protocol.query.render.data.ROWS_PER_CHUNK", 300)
    batches = [
        pa.record_batch([pa.array([f"s{i}" if i % 7 else None for i in range(n)])], ["x"])
        for n in (0, 1000, 5, 2000)
    ]
    key = SigningKey.generate()
    request = QueryRequest.from_json(
        {"query": "q", "include": ["proof"], "dataFormat": data_format}
    )
    bodies, commitments = [], []
    with ThreadPoolExecutor(2) as workers:
        for pool in (None, workers):
            writer = QueryResponseWriter(
                request, datasets=[], schema=batches[0].schema, signer=ResponseSigner(key)
            )
            bodies.append(b"".join(bytes(chunk) for chunk in writer.chunks(batches, pool)))
            assert writer.signed is not None
            commitments.append(writer.signed.commitment.to_json())
    assert bodies[0] == bodies[1]
    assert commitments[0] == commitments[1]
    assert len(json.loads(bodies[1])["output"]["data"]) == (1 if data_format == "JsonSoA" else 3005)


def test_in_order_keeps_order_bounds_the_work_and_hands_on_results_before_a_failure() -> None:
    started: list[int] = []
    release = threading.Event()

    def slow_square(item: int) -> int:
        started.append(item)
        if item == 0:
            release.wait(5)  # the first item finishes last
        return item * item

    def items() -> Iterator[int]:
        yield from range(6)
        raise ValueError("the source failed")

    results = in_order(slow_square, items(), ThreadPoolExecutor(2), ahead=3)
    waiter = threading.Timer(0.2, release.set)
    waiter.start()
    assert next(results) == 0
    assert sorted(started) == [0, 1, 2]  # no more than ``ahead`` taken before a result is
    rest = []
    with pytest.raises(ValueError, match="the source failed"):
        for result in results:
            rest.append(result)
    assert rest == [1, 4, 9, 16, 25]  # all taken before the failure come first, in order
    waiter.join()


def test_in_order_works_one_item_in_the_calling_thread_and_hands_it_on_before_a_failure() -> None:
    """A small answer (one chunk) is rendered without a hand-off to the workers."""
    workers = ThreadPoolExecutor(2)
    threads: list[str] = []

    def record(item: int) -> int:
        threads.append(threading.current_thread().name)
        return item + 1

    assert list(in_order(record, [1], workers)) == [2]
    assert threads == [threading.current_thread().name]

    def one_then_failure() -> Iterator[int]:
        yield 1
        raise ValueError("the source failed")

    results = in_order(record, one_then_failure(), workers)
    assert next(results) == 2
    with pytest.raises(ValueError, match="the source failed"):
        next(results)
    assert list(in_order(record, [], workers)) == []
    workers.shutdown()
