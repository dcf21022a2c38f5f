"""What a user of the query API meets first when a request is not quite right, through aiohttp
as a script would send it: a POST without a JSON body says what the route takes, and a dataset
named without its double quotes is answered with the quoted name (only ever one the caller may
read), as ``odfd sql`` and Flight SQL answer it."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.query_api.conftest import READ_TOKEN, Served
from tests.query_api.datasets import GROWING, PRIVATE

QUERY_TAKES = 'POST /query takes a JSON object such as {"query": "select 1"}'


async def post(
    served: Served, path: str, token: str | None = None, **body: Any
) -> tuple[int, dict[str, Any]]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as session:
        async with session.post(served.url.rstrip("/") + path, headers=headers, **body) as response:
            return response.status, await response.json()


async def get_query(served: Served, sql: str, token: str | None = None) -> tuple[int, Any]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as session:
        url = served.url.rstrip("/") + "/query"
        async with session.get(url, params={"query": sql}, headers=headers) as response:
            return response.status, await response.json()


async def test_a_post_without_a_json_body_says_what_the_route_takes(served: Served) -> None:
    assert await post(served, "/query") == (
        400,
        {"message": f"the request body is empty: {QUERY_TAKES}"},
    )
    form = await post(served, "/query", data={"query": "select 1"})  # as `curl -d query=…`
    assert form == (
        400,
        {
            "message": "the request body is not JSON (Expecting value at line 1 column 1): "
            + QUERY_TAKES
        },
    )
    status, body = await post(served, "/verify", data=b"  ")
    assert status == 400
    assert body["message"].startswith("the request body is empty: POST /verify takes the answer")
    # A JSON body is read as before, whatever its content type says; its own errors unchanged.
    assert await post(served, "/query", data=b'{"query": "select 1 as one"}') == (
        200,
        {"output": {"data": [{"one": 1}], "dataFormat": "JsonAoS"}},
    )
    status, body = await post(served, "/query", data=b'{"query": ')
    assert (status, body) == (400, {"message": "Expecting value at line 1 column 11"})


async def test_an_unquoted_dataset_name_is_answered_with_the_quoted_one(served: Served) -> None:
    hint = '; did you mean "{}"? (dataset names go in double quotes)'
    capitalized = GROWING.capitalize()
    assert await get_query(served, f"select * from {capitalized}") == (
        400,
        {"message": f"table 'odf.odf.{capitalized}' not found" + hint.format(GROWING)},
    )
    dotted = f"select * from {PRIVATE}"  # read as schema `secret`, table `nums`
    assert await get_query(served, dotted, READ_TOKEN) == (
        400,
        {"message": f"table 'odf.{PRIVATE}' not found" + hint.format(PRIVATE)},
    )
    # Without a token the private dataset does not exist: no hint names it.
    assert await get_query(served, dotted) == (
        400,
        {"message": f"table 'odf.{PRIVATE}' not found"},
    )
    # Pinned datasets are read under the aliases the request gives them: the hint names those.
    record = served.run(served.node.workspace.resolve(GROWING))
    pinned = {"id": str(record.id), "alias": "pinned.rows", "blockHash": str(record.head)}
    request = {"query": "select count(*) from pinned.rows", "datasets": [pinned]}
    assert await post(served, "/query", json=request) == (
        400,
        {"message": "table 'odf.pinned.rows' not found" + hint.format("pinned.rows")},
    )
    # kamu-cli's catalog and schema (a query written for it): odfd's named instead.
    assert await get_query(served, f'select * from kamu.kamu."{PRIVATE}"', READ_TOKEN) == (
        400,
        {
            "message": f"table 'kamu.kamu.{PRIVATE}' not found; the datasets are tables of "
            "catalog odf, schema odf (kamu-cli's are both named kamu); did you mean "
            f'"{PRIVATE}"? (or odf.odf."{PRIVATE}")'
        },
    )
    assert await get_query(served, f'select * from kamu.kamu."{PRIVATE}"') == (
        400,
        {"message": f"table 'kamu.kamu.{PRIVATE}' not found"},
    )
    # A name no dataset has keeps the engine's words alone.
    assert await get_query(served, "select * from nothing.here") == (
        400,
        {"message": "table 'odf.nothing.here' not found"},
    )


async def test_container_probes_get_the_references_health_answer(served: Served) -> None:
    """``/system/health`` was a plain 404 ``Not Found``: a kamu node's probes failed on odfd."""
    async with aiohttp.ClientSession() as session:
        base = served.url.rstrip("/") + "/system/health"
        for query in ("", "?type=liveness", "?type=readiness", "?type=startup"):
            async with session.get(base + query) as response:
                assert (response.status, await response.json()) == (200, {"ok": True})
        async with session.get(base + "?type=ready") as response:
            assert response.status == 400
            assert (await response.json())["message"].startswith("type: unknown variant `ready`")
