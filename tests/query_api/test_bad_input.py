"""Bad input and who sees what: each bad request is a 4xx with one ``{"message": ...}`` naming
the problem; private datasets exist only for a read token, on every endpoint."""

from __future__ import annotations

import asyncio
import copy
import time
import urllib.request
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from odfd.app import answers
from protocol.identity import Multihash
from protocol.query import QueryRequest
from tests.query_api.conftest import HEAVY_QUERY_SECONDS, READ_TOKEN, Served
from tests.query_api.datasets import POPULATION, PRIVATE

T = TypeVar("T")
QUERY = f'select city from "{POPULATION}" order by offset'


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"query": ', "Expecting value at line 1 column 11"),
        (b"[1]", "expected struct QueryRequest"),
        (b'{"query": "select 1", "foo": 1}', "unknown field `foo`"),
        (b'{"query": 1}', "query: invalid type: integer `1`, expected a string"),
        (b'{"query": "select 1", "limit": -1}', "limit: invalid value"),
        (b'{"query": "select 1", "dataFormat": "Csv"}', "unknown variant `Csv`"),
        (b'{"query": "select 1", "datasets": [{"id": "x", "alias": "a"}]}', "datasets[0].id"),
    ],
)
def test_malformed_query_bodies(served: Served, raw: bytes, message: str) -> None:
    reply = served.call("POST", "/query", raw=raw)
    assert reply.status == 400
    assert set(reply.body) == {"message"}
    assert message in reply.body["message"]


def test_malformed_query_strings(served: Served) -> None:
    unknown = served.call("GET", "/query?query=select+1&bogus=1")
    assert unknown.status == 400
    assert "unknown field `bogus`" in unknown.body["message"]
    missing = served.call("GET", "/query?limit=1")
    assert (missing.status, missing.body) == (400, {"message": "missing field `query`"})
    tail = served.call("GET", f"/{POPULATION}/tail?limit=x")
    assert tail.status == 400 and "limit" in tail.body["message"]
    metadata = served.call("GET", f"/{POPULATION}/metadata?include=Everything")
    assert metadata.status == 400 and "Everything" in metadata.body["message"]


def test_a_method_a_route_does_not_take_is_a_json_error_naming_the_ones_it_does(
    served: Served,
) -> None:
    put = served.call("PUT", "/query", {"query": "select 1"})
    assert (put.status, put.body) == (
        405,
        {"message": "PUT is not allowed on /query; it takes GET, OPTIONS, POST"},
    )
    assert put.headers["Allow"] == "GET,OPTIONS,POST"  # OPTIONS: a browser's preflight
    tail = served.call("POST", f"/{POPULATION}/tail")
    assert (tail.status, tail.body) == (
        405,
        {"message": f"POST is not allowed on /{POPULATION}/tail; it takes GET, OPTIONS"},
    )


def test_a_reference_route_odfd_does_not_serve_is_a_json_501_saying_why(served: Served) -> None:
    typed_data = {"domain": {"name": "x", "version": "1", "chainId": 1}, "types": {}}
    reply = served.call("POST", "/sign/eip712?key=did:odf:fed01", typed_data)
    assert reply.status == 501
    assert reply.body["message"].startswith("EIP-712 signing is not available on this node")


def test_bad_verify_requests(served: Served) -> None:
    answer = served.call("POST", "/query", {"query": QUERY, "include": ["Proof"]}).body
    request = {key: value for key, value in answer.items() if key != "output"}
    not_json = served.call("POST", "/verify", raw=b"not json")
    assert not_json.status == 400 and "message" in not_json.body
    missing = served.call("POST", "/verify", {"input": request["input"]})
    assert (missing.status, missing.body) == (400, {"message": "missing field `subQueries`"})

    bad_block = copy.deepcopy(request)
    bad_block["input"]["datasets"][0]["blockHash"] = str(Multihash.from_digest_sha3_256(b"x"))
    reply = served.call("POST", "/verify", bad_block)
    assert reply.status == 400
    assert reply.body["error"]["kind"] == "InvalidRequest::InputHash"

    tampered_hash = copy.deepcopy(request)
    tampered_hash["commitment"]["inputHash"] = str(Multihash.from_digest_sha3_256(b"x"))
    reply = served.call("POST", "/verify", tampered_hash)
    assert reply.body["error"]["kind"] == "InvalidRequest::InputHash"

    secp = copy.deepcopy(request)
    secp["proof"]["type"] = "EcdsaSecp256k1Signature2019"
    reply = served.call("POST", "/verify", secp)
    assert reply.status == 501 and "EcdsaSecp256k1Signature2019" in reply.body["message"]


def test_limits(served: Served) -> None:
    too_many = served.call("POST", "/query", {"query": QUERY, "limit": 1_000_001})
    assert too_many.status == 400
    assert "cap of 1000000 rows" in too_many.body["message"]
    huge = served.call("POST", "/query", raw=b'{"query": "' + b"x" * (2 << 20) + b'"}')
    assert huge.status == 413 and "message" in huge.body
    unsupported = served.call("POST", "/query", {"query": "select 1", "queryDialect": "SqlFlink"})
    assert unsupported.status == 400 and "SqlFlink" in unsupported.body["message"]


async def test_a_query_past_its_time_limit_is_stopped(served: Served) -> None:
    sql = "select sum(value) from generate_series(1, 10000000000)"
    limits = answers.QueryLimits(time_limit=0.5)
    with pytest.raises(answers.QueryRefusedError, match="time limit of 0.5 s"):
        await _on_node(served, answers.answer(served.node, QueryRequest(sql), limits=limits))


def test_private_datasets_exist_only_for_a_read_token(served: Served) -> None:
    sql = f'select count(*) as n from "{PRIVATE}"'
    hidden = served.call("POST", "/query", {"query": sql})
    assert hidden.status == 400 and "not found" in hidden.body["message"]
    shown = served.call("POST", "/query", {"query": sql}, token=READ_TOKEN)
    assert shown.body["output"]["data"] == [{"n": 2}]
    assert served.call("GET", f"/{PRIVATE}/tail").status == 404
    assert served.call("GET", f"/{PRIVATE}/tail", token=READ_TOKEN).status == 200
    assert served.call("GET", f"/{PRIVATE}/metadata").status == 404
    private_id = str(served.run(served.node.workspace.resolve(PRIVATE)).id)
    assert served.call("GET", f"/datasets/{private_id}").status == 404
    assert served.call("GET", f"/datasets/{private_id}", token=READ_TOKEN).status == 200
    pinned = {"query": "select 1 as one", "datasets": [{"id": private_id, "alias": "p"}]}
    assert served.call("POST", "/query", pinned).status == 404

    proved = served.call("POST", "/query", {"query": sql, "include": ["Proof"]}, token=READ_TOKEN)
    request = {key: value for key, value in proved.body.items() if key != "output"}
    assert served.call("POST", "/verify", request, token=READ_TOKEN).body == {"ok": True}
    anonymous = served.call("POST", "/verify", request)
    assert anonymous.body["error"]["kind"] == "VerificationFailed::DatasetNotFound"


async def _on_node(served: Served, work: Coroutine[Any, Any, T]) -> T:
    """Run on the node's loop (its workspace's connections belong to it)."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, served.loop))


def test_transfers_are_served_while_a_heavy_query_runs(served: Served) -> None:
    heavy = {"query": "select sum(value) as s from generate_series(1, 10000000000)"}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(served.call, "POST", "/query", heavy)
        time.sleep(0.3)
        started = time.monotonic()
        head = urllib.request.urlopen(f"{served.url}{POPULATION}/refs/head", timeout=10)
        assert head.status == 200
        assert time.monotonic() - started < 0.5
        assert not running.done()
        stopped = running.result(timeout=30)
    assert stopped.status == 400
    assert f"time limit of {HEAVY_QUERY_SECONDS:g} s" in stopped.body["message"]
