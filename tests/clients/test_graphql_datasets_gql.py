"""The ``gql`` client, unchanged, manages datasets through a running node's ``/graphql`` as the
kamu web UI does: it fetches the schema by introspection and validates each mutation against it,
then creates from a manifest, hides, renames and deletes, each seen in ``odfd list`` and in what
others may read; an anonymous mutation is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gql import Client, GraphQLRequest
from gql.transport.aiohttp import AIOHTTPTransport
from gql.transport.exceptions import TransportQueryError
from graphql import GraphQLError

from tests.server.graphql_node import Served, serve
from tests.server.test_graphql_datasets import DERIVED, TOKENS, add_with_accounts, listed

CREATE = """mutation Create($snapshot: String!) {
  datasets { createFromSnapshot(snapshot: $snapshot, snapshotFormat: YAML,
                                datasetVisibility: PUBLIC) {
    isSuccess message ... on CreateDatasetResultSuccess { dataset { id alias } } } } }"""
HIDE = """mutation Hide($id: DatasetID!) {
  datasets { byId(datasetId: $id) { setVisibility(visibility: {private: {}}) { message } } } }"""
RENAME = """mutation Rename($id: DatasetID!, $name: DatasetName!) {
  datasets { byId(datasetId: $id) { rename(newName: $name) {
    message ... on RenameResultSuccess { oldName newName } } } } }"""
DELETE = """mutation Delete($id: DatasetID!) {
  datasets { byId(datasetId: $id) { delete { message
    ... on DeleteResultSuccess { deletedDataset } } } } }"""
LOOKUP = """query Lookup($id: DatasetID!) { datasets { byId(datasetId: $id) { alias } } }"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("graphql-datasets-gql")) / "ws"
    yield from serve(root, add=add_with_accounts)


async def execute(served: Served, query: str, who: str | None, **variables: Any) -> Any:
    headers = None if who is None else {"Authorization": f"Bearer {TOKENS[who]}"}
    transport = AIOHTTPTransport(url=f"{served.url}/graphql", headers=headers)
    async with Client(transport=transport, fetch_schema_from_transport=True) as session:
        return await session.execute(GraphQLRequest(query, variable_values=variables or None))


async def test_manage_a_dataset_through_gql(served: Served) -> None:
    created = await execute(served, CREATE, "alice", snapshot=DERIVED)
    result = created["datasets"]["createFromSnapshot"]
    assert (result["isSuccess"], result["message"]) == (True, "Success")
    dataset_id = result["dataset"]["id"]
    assert result["dataset"]["alias"] == "alice/hot-days"
    assert "alice/hot-days" in listed(served)
    hidden = await execute(served, HIDE, "alice", id=dataset_id)
    assert hidden["datasets"]["byId"]["setVisibility"] == {"message": "Success"}
    assert (await execute(served, LOOKUP, "bob", id=dataset_id))["datasets"]["byId"] is None
    renamed = await execute(served, RENAME, "alice", id=dataset_id, name="warm-days")
    assert renamed["datasets"]["byId"]["rename"] == {
        "message": "Success",
        "oldName": "hot-days",
        "newName": "warm-days",
    }
    assert (await execute(served, LOOKUP, "bob", id=dataset_id))["datasets"]["byId"] is None
    deleted = await execute(served, DELETE, "alice", id=dataset_id)
    assert deleted["datasets"]["byId"]["delete"] == {
        "message": "Success",
        "deletedDataset": "alice/warm-days",
    }
    assert "alice/warm-days" not in listed(served)


async def test_an_anonymous_mutation_is_refused_through_gql(served: Served) -> None:
    with pytest.raises(TransportQueryError) as raised:
        await execute(served, CREATE, None, snapshot=DERIVED)
    assert raised.value.errors is not None
    assert raised.value.errors[0]["message"] == "Anonymous access forbidden"
    assert "alice/hot-days" not in listed(served)


async def test_mutations_the_schema_does_not_allow_are_refused(served: Served) -> None:
    """gql's introspection does not ask for ``isOneOf``, so the node refuses two visibilities;
    a field the node does not serve is refused by gql itself, from the fetched schema."""
    both = """mutation { datasets { byId(datasetId: "did:odf:x") {
      setVisibility(visibility: {private: {}, public: {anonymousAvailable: true}}) { message }
    } } }"""
    with pytest.raises(TransportQueryError, match="exactly one field must be specified"):
        await execute(served, both, "alice")
    with pytest.raises(GraphQLError, match="Cannot query field 'flows'"):
        await execute(served, 'mutation { datasets { byId(datasetId: "x") { flows } } }', "alice")
