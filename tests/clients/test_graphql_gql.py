"""The ``gql`` client (its aiohttp transport), unchanged, reads a running node's ``/graphql``:
it fetches the schema by introspection, validates its queries against it, and runs kamu-cli's
remote search query and a dataset lookup with variables, with and without a read token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gql import Client, GraphQLRequest
from gql.transport.aiohttp import AIOHTTPTransport
from gql.transport.exceptions import TransportQueryError
from graphql import GraphQLError

from tests.server.graphql_node import READ_TOKEN, SEARCH_QUERY, Served, serve
from tests.server.odata_node import PRIVATE, weather


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(Path(tmp_path_factory.mktemp("graphql-gql")) / "ws")


async def execute(
    served: Served, query: str, token: str | None = None, **variables: Any
) -> dict[str, Any]:
    headers = None if token is None else {"Authorization": f"Bearer {token}"}
    transport = AIOHTTPTransport(url=f"{served.url}/graphql", headers=headers)
    async with Client(transport=transport, fetch_schema_from_transport=True) as session:
        request = GraphQLRequest(query, variable_values=variables or None)
        result: dict[str, Any] = await session.execute(request)
        return result


async def test_kamu_search_through_gql(served: Served) -> None:
    found = await execute(served, SEARCH_QUERY.replace("{query}", ""))
    nodes = found["search"]["query"]["nodes"]
    assert [(n["owner"]["accountName"], n["name"], n["kind"]) for n in nodes] == [
        ("alice", "empty", "ROOT"),
        ("alice", "weather", "ROOT"),
        ("kamu", "foo.bar", "ROOT"),
    ]
    weather_node = nodes[1]
    assert weather_node["data"]["numRecordsTotal"] == weather().num_rows
    assert weather_node["metadata"]["chain"]["blocks"]["totalCount"] == 3
    with_token = await execute(served, SEARCH_QUERY.replace("{query}", "nums"), READ_TOKEN)
    assert [n["name"] for n in with_token["search"]["query"]["nodes"]] == [PRIVATE]


async def test_lookup_with_variables_through_gql(served: Served) -> None:
    query = """query Lookup($account: AccountName!, $name: DatasetName!) {
      datasets { byOwnerAndName(accountName: $account, datasetName: $name) {
        alias data { tail(limit: 1, dataFormat: JSON_AOA) {
          ... on DataQueryResultSuccess { data { content numRecords } } } } } } }"""
    found = await execute(served, query, account="alice", name="weather")
    dataset = found["datasets"]["byOwnerAndName"]
    assert dataset["alias"] == "alice/weather"
    assert dataset["data"]["tail"]["data"]["numRecords"] == 1
    hidden = await execute(served, query, account="kamu", name=PRIVATE)
    assert hidden["datasets"]["byOwnerAndName"] is None


async def test_gql_reports_what_the_node_does_not_serve(served: Served) -> None:
    with pytest.raises(GraphQLError, match="Cannot query field 'processes'"):
        await execute(served, '{ datasets { byId(datasetId: "x") { flows { processes } } } }')
    with pytest.raises(TransportQueryError, match="perPage"):
        await execute(served, '{ search { query(query: "", perPage: -1) { totalCount } } }')
