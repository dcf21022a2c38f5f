"""``/graphql`` on a node served as ``odfd serve`` serves it: kamu-cli's remote search query,
sent as its ``SearchServiceRemoteImpl`` sends it, answered with the datasets the caller may read
(checked against the workspace's own listing and the files on disk); the dataset and account
lookups, a chain's blocks page by page, a dataset's tail and a SQL query; and GraphQL's errors
(an unknown field named, a bad argument with its path) beside the HTTP errors of a request that
is no GraphQL request."""

from __future__ import annotations

import contextlib
import io
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odfd.cli.main import main
from tests.server.graphql_node import READ_TOKEN, SEARCH_QUERY, Served, serve
from tests.server.odata_node import PRIVATE, foo_bar


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(Path(tmp_path_factory.mktemp("graphql")) / "ws")


@pytest.fixture(scope="module")
def listed(served: Served) -> dict[str, dict[str, Any]]:
    """``odfd list``'s datasets of the served workspace, by alias."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list", "--root", str(served.root), "-o", "json"]) == 0
    return {entry["alias"]: entry for entry in json.loads(out.getvalue())}


def kamu_search(served: Served, text: str, token: str | None = None) -> list[dict[str, Any]]:
    status, answer = served.post(SEARCH_QUERY.replace("{query}", text), token)
    assert status == 200 and "errors" not in answer, answer
    nodes: list[dict[str, Any]] = answer["data"]["search"]["query"]["nodes"]
    return nodes


def data_bytes(served: Served, dataset_id: str) -> int:
    folder = served.root / "datasets" / dataset_id.removeprefix("did:odf:") / "data"
    return sum(path.stat().st_size for path in folder.iterdir())


def expected_node(served: Served, entry: dict[str, Any], records: int) -> dict[str, Any]:
    account, _, name = entry["alias"].rpartition("/")
    return {
        "id": entry["id"],
        "name": name,
        "owner": {"accountName": account or "kamu"},
        "kind": entry["kind"].upper(),
        "metadata": {"chain": {"blocks": {"totalCount": entry["blocks"]}}},
        "data": {"numRecordsTotal": records, "estimatedSizeBytes": data_bytes(served, entry["id"])},
    }


RECORDS = {"foo.bar": 3, "alice/weather": 150, "alice/empty": 0, PRIVATE: 2}


def test_kamu_search_finds_what_the_caller_may_read(
    served: Served, listed: dict[str, dict[str, Any]]
) -> None:
    public = [alias for alias in sorted(listed) if alias != PRIVATE]
    assert kamu_search(served, "") == [
        expected_node(served, listed[alias], RECORDS[alias]) for alias in public
    ]
    with_token = kamu_search(served, "", READ_TOKEN)
    assert [node["name"] for node in with_token] == ["empty", "weather", "foo.bar", "secret.nums"]
    assert with_token[-1] == expected_node(served, listed[PRIVATE], 2)
    assert [node["name"] for node in kamu_search(served, "WEA")] == ["weather"]
    assert kamu_search(served, "secret") == []
    assert kamu_search(served, "nothing-like-it") == []


def test_a_bad_token_is_refused_as_by_the_query_api(served: Served) -> None:
    status, answer = served.post("{ apiVersion }", "not-a-token")
    assert status == 401 and set(answer) == {"message"}, answer
    assert (status, answer) == _query_api_with_token(served, "not-a-token")


def _query_api_with_token(served: Served, token: str) -> tuple[int, Any]:
    request = urllib.request.Request(f"{served.url}/query?query=select+1")
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_search_pages(served: Served) -> None:
    query = """query($page: Int!) { search { query(query: "", page: $page, perPage: 2) {
        nodes { ... on Dataset { name } } edges { node { ... on Dataset { name } } }
        totalCount pageInfo { hasPreviousPage hasNextPage currentPage totalPages } } } }"""
    pages = []
    for page in (0, 1, 2):
        status, answer = served.post(query, READ_TOKEN, variables={"page": page})
        assert status == 200, answer
        pages.append(answer["data"]["search"]["query"])
    assert [[n["name"] for n in p["nodes"]] for p in pages] == [
        ["empty", "weather"],
        ["foo.bar", "secret.nums"],
        [],
    ]
    assert [[e["node"] for e in p["edges"]] for p in pages] == [p["nodes"] for p in pages]
    assert {p["totalCount"] for p in pages} == {4}
    assert [p["pageInfo"] for p in pages] == [
        {"hasPreviousPage": False, "hasNextPage": True, "currentPage": 0, "totalPages": 2},
        {"hasPreviousPage": True, "hasNextPage": False, "currentPage": 1, "totalPages": 2},
        {"hasPreviousPage": True, "hasNextPage": False, "currentPage": 2, "totalPages": 2},
    ]


def test_dataset_lookups(served: Served, listed: dict[str, dict[str, Any]]) -> None:
    weather, private = listed["alice/weather"], listed[PRIVATE]
    query = """query($id: DatasetID!, $private: DatasetID!) { datasets {
        byId(datasetId: $id) { alias }
        hidden: byId(datasetId: $private) { alias }
        byOwnerAndName(accountName: "Alice", datasetName: "weather") {
          id name alias kind head owner { id accountName }
          visibility { __typename ... on PublicDatasetVisibility { anonymousAvailable } } }
        byAccountName(accountName: "alice") { nodes { name } totalCount }
        kamu: byAccountName(accountName: "kamu") { nodes { name } } }
      accounts { byName(name: "alice") { accountName displayName accountType isAdmin }
        nobody: byName(name: "nobody") { id } } apiVersion }"""
    variables = {"id": weather["id"], "private": private["id"]}
    status, answer = served.post(query, variables=variables)
    assert status == 200 and "errors" not in answer, answer
    datasets = answer["data"]["datasets"]
    assert datasets["byId"] == {"alias": "alice/weather"}
    assert datasets["hidden"] is None
    found = datasets["byOwnerAndName"]
    assert found["id"] == weather["id"] and found["head"] == weather["head"]
    assert (found["name"], found["alias"], found["kind"]) == ("weather", "alice/weather", "ROOT")
    assert found["owner"]["accountName"] == "alice"
    assert found["owner"]["id"].startswith("did:odf:")
    assert found["visibility"] == {
        "__typename": "PublicDatasetVisibility",
        "anonymousAvailable": True,
    }
    assert datasets["byAccountName"] == {
        "nodes": [{"name": "empty"}, {"name": "weather"}],
        "totalCount": 2,
    }
    assert datasets["kamu"] == {"nodes": [{"name": "foo.bar"}]}
    assert answer["data"]["accounts"] == {
        "byName": {
            "accountName": "alice",
            "displayName": "alice",
            "accountType": "USER",
            "isAdmin": False,
        },
        "nobody": None,
    }
    assert answer["data"]["apiVersion"]
    status, answer = served.post(query, READ_TOKEN, variables=variables)
    assert answer["data"]["datasets"]["hidden"] == {"alias": PRIVATE}
    status, answer = served.post(
        '{ datasets { byOwnerAndName(accountName: "kamu", datasetName: "secret.nums") '
        "{ visibility { __typename } } } }",
        READ_TOKEN,
    )
    visibility = answer["data"]["datasets"]["byOwnerAndName"]["visibility"]
    assert visibility == {"__typename": "PrivateDatasetVisibility"}


def test_chain_blocks_page_by_page(served: Served, listed: dict[str, dict[str, Any]]) -> None:
    query = """query($page: Int) { datasets { byOwnerAndName(accountName: "kamu",
        datasetName: "foo.bar") { createdAt lastUpdatedAt metadata {
          currentSchema(format: ARROW_JSON) { format content }
          chain { refs { name blockHash } blocks(page: $page, perPage: 3) {
            nodes { blockHash sequenceNumber systemTime event { __typename
              ... on AddData { newData { offsetInterval { start end } } } } }
            totalCount pageInfo { hasNextPage currentPage } } } } } } }"""
    pages = []
    for page in (0, 1):
        status, answer = served.post(query, variables={"page": page})
        assert status == 200 and "errors" not in answer, answer
        pages.append(answer["data"]["datasets"]["byOwnerAndName"])
    chain = [page["metadata"]["chain"] for page in pages]
    blocks = [block for page in chain for block in page["blocks"]["nodes"]]
    assert [b["sequenceNumber"] for b in blocks] == [3, 2, 1, 0]
    assert [b["event"]["__typename"] for b in blocks] == [
        "AddData",
        "SetDataSchema",
        "SetVocab",
        "Seed",
    ]
    assert blocks[0]["event"]["newData"] == {"offsetInterval": {"start": 0, "end": 2}}
    head = listed["foo.bar"]["head"]
    assert blocks[0]["blockHash"] == head
    assert chain[0]["refs"] == [{"name": "head", "blockHash": head}]
    blocks_folder = served.root / "datasets" / listed["foo.bar"]["id"][8:] / "blocks"
    assert {b["blockHash"] for b in blocks} == {path.name for path in blocks_folder.iterdir()}
    assert [c["blocks"]["totalCount"] for c in chain] == [4, 4]
    assert [c["blocks"]["pageInfo"]["hasNextPage"] for c in chain] == [True, False]
    assert {b["systemTime"] for b in blocks} == {"2050-01-01T12:00:00Z"}
    assert pages[0]["createdAt"] == pages[0]["lastUpdatedAt"] == "2050-01-01T12:00:00Z"
    schema = pages[0]["metadata"]["currentSchema"]
    assert schema["format"] == "ARROW_JSON"
    fields = [f["name"] for f in json.loads(schema["content"])["fields"]]
    assert fields == foo_bar().schema.names


def test_tail_and_query(served: Served) -> None:
    query = """{ datasets { byOwnerAndName(accountName: "kamu", datasetName: "foo.bar") {
        data { tail(limit: 2, dataFormat: JSON_AOS, schemaFormat: ARROW_JSON) {
          ... on DataQueryResultSuccess { data { format content numRecords } limit } } } } }
      data {
        csv: query(query: "select city, population from \\"foo.bar\\" order by city",
                   queryDialect: SQL_DATA_FUSION, dataFormat: CSV) {
          ... on DataQueryResultSuccess { data { content numRecords } datasets { alias } } }
        soa: query(query: "select city from \\"foo.bar\\" order by city desc",
                   queryDialect: SQL_DATA_FUSION, dataFormat: JSON_SOA, skip: 1) {
          ... on DataQueryResultSuccess { data { content } } }
        bad: query(query: "select nothing from nowhere", queryDialect: SQL_DATA_FUSION) {
          ... on DataQueryResultError { errorKind errorMessage } }
        hidden: query(query: "select * from \\"secret.nums\\"", queryDialect: SQL_DATA_FUSION) {
          __typename } } }"""
    status, answer = served.post(query)
    assert status == 200 and "errors" not in answer, answer
    tail = answer["data"]["datasets"]["byOwnerAndName"]["data"]["tail"]
    rows = foo_bar().to_pylist()[1:]
    assert [(r["city"], r["population"]) for r in json.loads(tail["data"]["content"])] == [
        (r["city"], r["population"]) for r in rows
    ]
    assert (tail["data"]["format"], tail["data"]["numRecords"], tail["limit"]) == (
        "JSON_AOS",
        2,
        2,
    )
    data = answer["data"]["data"]
    assert data["csv"]["data"] == {
        "content": "city,population\nA,1000\nB,2000\nC,3000\n",
        "numRecords": 3,
    }
    assert data["csv"]["datasets"] == [{"alias": "foo.bar"}]
    assert json.loads(data["soa"]["data"]["content"]) == {"city": ["B", "A"]}
    assert data["bad"]["errorKind"] == "INVALID_SQL" and data["bad"]["errorMessage"]
    assert data["hidden"] == {"__typename": "DataQueryResultError"}


def test_graphql_errors_name_the_field(served: Served) -> None:
    status, answer = served.post('{ datasets { byId(datasetId: "x") { flows { processes } } } }')
    assert status == 200 and answer["data"] is None
    assert "'processes'" in answer["errors"][0]["message"], answer
    status, answer = served.post('{ datasets { byId(datasetId: "did:odf:nope") { id } } }')
    assert answer["data"] == {"datasets": {"byId": None}}
    assert answer["errors"][0]["path"] == ["datasets", "byId"], answer
    assert "datasetId" in answer["errors"][0]["message"]
    status, answer = served.post('{ search { query(query: "", perPage: 0) { totalCount } } }')
    assert answer["errors"][0]["path"] == ["search", "query"]
    assert "perPage" in answer["errors"][0]["message"]
    status, answer = served.post(
        '{ data { query(query: "select 1", queryDialect: SQL_DATA_FUSION, limit: 100000) '
        "{ __typename } } }"
    )
    assert answer["errors"][0]["path"] == ["data", "query"]
    assert "query_max_rows" in answer["errors"][0]["message"]
    status, answer = served.post("{ search { query { totalCount } } }")
    assert "query" in answer["errors"][0]["message"] and answer["data"] is None


def test_requests_that_are_not_graphql_are_400(served: Served) -> None:
    for body, words in [
        (b"{not json", "the request body is not JSON"),
        (b"[1]", "not a JSON object"),
        (b"{}", "the request has no query"),
        (b'{"query": "{ apiVersion }", "variables": [1]}', "variables must be a JSON object"),
    ]:
        status, answer = served.raw(body)
        assert status == 400 and set(answer) == {"message"}, answer
        assert words in answer["message"]


def test_get_with_a_query_parameter(served: Served) -> None:
    status, answer = served.get("/graphql?query=%7B%20apiVersion%20%7D")
    assert status == 200 and answer == {"data": {"apiVersion": "0.1"}}


def test_not_in_the_query_apis_openapi_document(served: Served) -> None:
    status, document = served.get("/openapi.json")
    assert status == 200 and "/graphql" not in document["paths"]


def test_a_request_of_too_many_tokens_is_refused(served: Served) -> None:
    fields = " ".join(f"a{n}: apiVersion" for n in range(8_000))
    status, answer = served.post("{ " + fields + " }")
    assert status == 200 and answer["data"] is None
    assert "tokens" in answer["errors"][0]["message"], answer


def test_tail_defaults_and_a_dataset_without_data(served: Served) -> None:
    query = """{ datasets { weather: byOwnerAndName(accountName: "alice", datasetName: "weather") {
        data { tail { ... on DataQueryResultSuccess { data { format numRecords }
          schema { format } limit } } } }
      empty: byOwnerAndName(accountName: "alice", datasetName: "empty") {
        metadata { currentSchema { content } }
        data { numRecordsTotal estimatedSize tail { ... on DataQueryResultSuccess {
          data { content numRecords } } } } } } }"""
    status, answer = served.post(query)
    assert status == 200 and "errors" not in answer, answer
    weather = answer["data"]["datasets"]["weather"]["data"]["tail"]
    assert weather == {
        "data": {"format": "JSON", "numRecords": 20},
        "schema": {"format": "PARQUET"},
        "limit": 20,
    }
    empty = answer["data"]["datasets"]["empty"]
    assert empty["metadata"] == {"currentSchema": None}
    assert empty["data"] == {
        "numRecordsTotal": 0,
        "estimatedSize": 0,
        "tail": {"data": {"content": "[]", "numRecords": 0}},
    }
