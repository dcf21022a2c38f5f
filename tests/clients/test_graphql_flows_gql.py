"""The ``gql`` client, unchanged, reads a dataset's flow runs through a running node's
``/graphql`` as the kamu web UI's "Flows" tab does: it fetches the schema by introspection and
validates each query against it, pages through the runs a real flow runner recorded, reads one
by id, and is refused (before sending) a field the node does not serve."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gql import Client, GraphQLRequest
from gql.transport.aiohttp import AIOHTTPTransport
from graphql import GraphQLError

from tests.server.graphql_node import READ_TOKEN, Served, serve
from tests.server.odata_node import PRIVATE
from tests.server.test_graphql_flows import add_with_flow_runs

PAGE = """query Runs($page: Int!) {
  datasets { byOwnerAndName(accountName: "alice", datasetName: "weather") { flows { runs {
    listFlows(page: $page, perPage: 2) { totalCount pageInfo { hasNextPage totalPages }
      nodes { flowId status outcome { __typename ... on FlowFailedError { reason {
        ... on TaskFailureReasonGeneral { message } } } }
        timing { initiatedAt completedAt } } } } } } } }"""
ONE = """query One($flowId: FlowID!) {
  datasets { byOwnerAndName(accountName: "alice", datasetName: "weather") { flows { runs {
    getFlow(flowId: $flowId) { message ... on GetFlowSuccess { flow { flowId status } } } } } } } }"""
PRIVATE_RUNS = """query Private($name: DatasetName!) {
  datasets { byOwnerAndName(accountName: "kamu", datasetName: $name) { flows { runs {
    listFlows { totalCount } } } } } }"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("graphql-flows-gql")) / "ws"
    yield from serve(root, add=add_with_flow_runs)


async def execute(served: Served, query: str, token: str | None = None, **variables: Any) -> Any:
    headers = None if token is None else {"Authorization": f"Bearer {token}"}
    transport = AIOHTTPTransport(url=f"{served.url}/graphql", headers=headers)
    async with Client(transport=transport, fetch_schema_from_transport=True) as session:
        return await session.execute(GraphQLRequest(query, variable_values=variables or None))


def _runs(answer: Any) -> Any:
    return answer["datasets"]["byOwnerAndName"]["flows"]["runs"]


async def test_page_through_a_datasets_flow_runs(served: Served) -> None:
    pages = [_runs(await execute(served, PAGE, page=page))["listFlows"] for page in (0, 1)]
    assert [p["totalCount"] for p in pages] == [4, 4]
    assert [p["pageInfo"] for p in pages] == [
        {"hasNextPage": True, "totalPages": 2},
        {"hasNextPage": False, "totalPages": 2},
    ]
    nodes = pages[0]["nodes"] + pages[1]["nodes"]
    ids = [int(n["flowId"]) for n in nodes]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 4
    assert {n["status"] for n in nodes} == {"FINISHED"}
    [failed] = [n for n in nodes if n["outcome"]["__typename"] == "FlowFailedError"]
    assert "no-such-target" in failed["outcome"]["reason"]["message"]
    assert all(n["timing"]["initiatedAt"] <= n["timing"]["completedAt"] for n in nodes)
    one = _runs(await execute(served, ONE, flowId=failed["flowId"]))["getFlow"]
    assert one == {"message": "Success", "flow": {"flowId": failed["flowId"], "status": "FINISHED"}}


async def test_private_dataset_runs_need_read_access(served: Served) -> None:
    assert (await execute(served, PRIVATE_RUNS, name=PRIVATE))["datasets"]["byOwnerAndName"] is None
    found = await execute(served, PRIVATE_RUNS, READ_TOKEN, name=PRIVATE)
    assert _runs(found)["listFlows"] == {"totalCount": 1}


async def test_a_field_not_served_is_refused_before_sending(served: Served) -> None:
    query = """{ datasets { byOwnerAndName(accountName: "alice", datasetName: "weather") {
      flows { processes { primary { flowType } } } } } }"""
    with pytest.raises(GraphQLError, match="Cannot query field 'processes' on type 'DatasetFlows'"):
        await execute(served, query)
