"""A large answer is sent while the engine still produces it: the body is byte for byte the
answer rendered whole (with its proof), a query that fails before the first piece is a 4xx with
its message, and one that fails after it ends the body early (the client sees a truncated
body, never a complete-looking one)."""

from __future__ import annotations

import http.client
import json
import urllib.request
from typing import Any

import pytest

from odfd.app import answers
from protocol.query import QueryRequest
from tests.query_api import verifier
from tests.query_api.conftest import HEAVY_QUERY_SECONDS, Served

LARGE = "select value as v, value * 2 as w from generate_series(1, 150000) order by value"
HEAVY = "select sum(value) as v, 0 as w from generate_series(1, 100000000000)"


def _post(served: Served, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"{served.url}query",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("data_format", ["JsonAoS", "JsonSoA"])
def test_a_streamed_answer_is_the_answer_rendered_whole(served: Served, data_format: str) -> None:
    body = {"query": LARGE, "limit": 120_000, "dataFormat": data_format, "include": ["Proof"]}
    status, streamed = _post(served, body)
    assert status == 200
    signer = answers.node_signer(served.node)
    whole = served.run(answers.answer(served.node, QueryRequest.from_json(body), signer=signer))
    assert streamed == whole
    answer = json.loads(streamed)
    verifier.check(answer)
    rows = answer["output"]["data"]
    count = len(rows) if data_format == "JsonAoS" else len(rows["v"])
    assert count == 120_000


def test_a_query_failing_before_the_first_piece_is_a_client_error(served: Served) -> None:
    sql = f"select value as v, 1 as w from generate_series(1, 5000) union all {HEAVY}"
    status, body = _post(served, {"query": sql, "limit": 10_000})
    assert status == 400
    assert f"time limit of {HEAVY_QUERY_SECONDS:g} s" in json.loads(body)["message"]


def test_a_query_failing_after_the_first_piece_ends_the_body_early(served: Served) -> None:
    sql = f"select value as v, 1 as w from generate_series(1, 300000) union all {HEAVY}"
    with pytest.raises(http.client.IncompleteRead):
        _post(served, {"query": sql, "limit": 1_000_000})
