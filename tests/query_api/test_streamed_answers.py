"""A large answer is sent while the engine still produces it: the body is byte for byte the
answer rendered whole (with its proof), a query that fails before the first piece is a 4xx with
its message, one that fails after it ends the body early (the client sees a truncated body,
never a complete-looking one), and a client that leaves mid-answer leaves nothing running."""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import time
import traceback
import urllib.request
from typing import Any

import pytest

from odfd.app import answers, batch_feed
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


def test_a_client_leaving_mid_answer_frees_the_server(served: Served) -> None:
    """More answers abandoned than the node has worker threads, each while its rendering
    thread waits for rows the engine has not produced yet: a thread left waiting would be held
    for good, and the last query would find none to plan in."""
    stalling = f"select value as v, 1 as w from generate_series(1, 300000) union all {HEAVY}"
    body = json.dumps({"query": stalling, "limit": 1_000_000}).encode()
    host, port = served.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    for _ in range(min(32, (os.cpu_count() or 1) + 4) + 1):  # the default executor's size + 1
        with socket.create_connection((host, int(port)), timeout=30) as client:
            client.sendall(
                b"POST /query HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            assert client.recv(4096).startswith(b"HTTP/1.1 200")
    status, whole = _post(served, {"query": LARGE, "limit": 150_000})
    assert status == 200 and len(json.loads(whole)["output"]["data"]) == 150_000
    time.sleep(HEAVY_QUERY_SECONDS)  # every abandoned query has ended by now
    waiting = [
        frame
        for frame in sys._current_frames().values()
        if any(entry.filename == batch_feed.__file__ for entry in traceback.extract_stack(frame))
    ]
    assert not waiting, "a rendering thread still waits for rows of an abandoned answer"
