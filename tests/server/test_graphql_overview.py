"""``/graphql``'s dataset overview and lineage, as the kamu web UI reads them: a dataset's current
info, license, readme, vocabulary, push and polling sources and transform, and the datasets it reads
and that read it, one step each way. The node holds the OData tests' datasets plus a described
root and a derivative reading the public ``foo.bar``, the private ``secret.nums`` and a dataset
this node does not hold: the private input is invisible without a read token."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.identity import DatasetId, DatasetRef
from protocol.model import (
    AddPushSource,
    AttachmentEmbedded,
    AttachmentsEmbedded,
    DatasetKind,
    MergeStrategyAppend,
    MetadataEvent,
    ReadStepNdJson,
    SetAttachments,
    SetInfo,
    SetLicense,
    SetTransform,
    SetVocab,
    SqlQueryStep,
    TransformInput,
    TransformSql,
)
from storage.workspace import Workspace
from tests.server.graphql_node import READ_TOKEN, Served, serve
from tests.server.odata_node import PRIVATE, SYSTEM_TIME, add_datasets

ABSENT = DatasetId(bytes(range(32)))
"""An input of ``alice/joined`` that this node does not hold."""
README = "# Described\n\nA root with every overview event.\n"
JOIN = "SELECT * FROM pub UNION ALL SELECT * FROM priv"


async def add_overview_datasets(workspace: Workspace) -> None:
    await add_datasets(workspace)
    events: list[MetadataEvent] = [
        SetInfo(description="Readings, described", keywords=("weather", "test")),
        SetLicense(
            short_name="CC0",
            name="Creative Commons Zero",
            spdx_id="CC0-1.0",
            website_url="https://creativecommons.org/publicdomain/zero/1.0/",
        ),
        SetAttachments(
            attachments=AttachmentsEmbedded(
                items=(AttachmentEmbedded(path="README.md", content=README),)
            )
        ),
        SetVocab(event_time_column="observed"),
        AddPushSource(source_name="feed", read=ReadStepNdJson(), merge=MergeStrategyAppend()),
    ]
    await workspace.create_dataset(
        "alice/described", DatasetKind.ROOT, events, system_time=SYSTEM_TIME
    )
    ids = {r.alias: r.id for r in await workspace.list_datasets()}
    transform = SetTransform(
        inputs=(
            TransformInput(dataset_ref=DatasetRef(ids["foo.bar"]), alias="pub"),
            TransformInput(dataset_ref=DatasetRef(ids[PRIVATE]), alias="priv"),
            TransformInput(dataset_ref=DatasetRef(ABSENT), alias="gone"),
        ),
        transform=TransformSql(engine="datafusion", queries=(SqlQueryStep(query=JOIN),)),
    )
    await workspace.create_dataset(
        "alice/joined", DatasetKind.DERIVATIVE, [transform], system_time=SYSTEM_TIME
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("graphql-overview")) / "ws"
    yield from serve(root, add=add_overview_datasets)


OVERVIEW = """query($account: AccountName!, $name: DatasetName!) {
  datasets { byOwnerAndName(accountName: $account, datasetName: $name) { metadata {
    currentInfo { description keywords }
    currentLicense { shortName name spdxId websiteUrl }
    currentReadme
    currentVocab { offsetColumn operationTypeColumn systemTimeColumn eventTimeColumn }
    currentPushSources { sourceName preprocess { __typename } }
    currentPollingSource { __typename }
    currentTransform { transform { ... on TransformSql { engine queries { alias query } } } }
  } } } }"""

LINEAGE = """query($account: AccountName!, $name: DatasetName!) {
  datasets { byOwnerAndName(accountName: $account, datasetName: $name) { metadata {
    currentUpstreamDependencies { __typename message
      ... on DependencyDatasetResultAccessible { dataset { alias kind } }
      ... on DependencyDatasetResultNotAccessible { id } }
    currentDownstreamDependencies { __typename message
      ... on DependencyDatasetResultAccessible { dataset { alias } } }
  } } } }"""


def metadata_of(
    served: Served, query: str, account: str, name: str, token: str | None = None
) -> dict[str, Any]:
    status, answer = served.post(query, token, variables={"account": account, "name": name})
    assert status == 200 and "errors" not in answer, answer
    found = answer["data"]["datasets"]["byOwnerAndName"]
    assert found is not None, (account, name)
    metadata: dict[str, Any] = found["metadata"]
    return metadata


def test_a_described_root_shows_its_current_events(served: Served) -> None:
    assert metadata_of(served, OVERVIEW, "alice", "described") == {
        "currentInfo": {"description": "Readings, described", "keywords": ["weather", "test"]},
        "currentLicense": {
            "shortName": "CC0",
            "name": "Creative Commons Zero",
            "spdxId": "CC0-1.0",
            "websiteUrl": "https://creativecommons.org/publicdomain/zero/1.0/",
        },
        "currentReadme": README,
        "currentVocab": {
            "offsetColumn": None,
            "operationTypeColumn": None,
            "systemTimeColumn": None,
            "eventTimeColumn": "observed",
        },
        "currentPushSources": [{"sourceName": "feed", "preprocess": None}],
        "currentPollingSource": None,
        "currentTransform": None,
    }


def test_a_dataset_without_them_answers_empty_info_and_nulls(served: Served) -> None:
    assert metadata_of(served, OVERVIEW, "alice", "weather") == {
        "currentInfo": {"description": None, "keywords": None},
        "currentLicense": None,
        "currentReadme": None,
        "currentVocab": None,
        "currentPushSources": [],
        "currentPollingSource": None,
        "currentTransform": None,
    }


def test_a_derivative_shows_its_transform(served: Served) -> None:
    found = metadata_of(served, OVERVIEW, "alice", "joined")["currentTransform"]
    assert found == {
        "transform": {"engine": "datafusion", "queries": [{"alias": None, "query": JOIN}]}
    }


def _upstream(alias: str, kind: str) -> dict[str, Any]:
    return {
        "__typename": "DependencyDatasetResultAccessible",
        "message": "Found",
        "dataset": {"alias": alias, "kind": kind},
    }


ABSENT_INPUT = {
    "__typename": "DependencyDatasetResultNotAccessible",
    "message": "Not Accessible",
    "id": str(ABSENT),
}


def test_lineage_hides_a_private_upstream_from_an_anonymous_caller(served: Served) -> None:
    anonymous = metadata_of(served, LINEAGE, "alice", "joined")
    assert anonymous["currentUpstreamDependencies"] == [_upstream("foo.bar", "ROOT"), ABSENT_INPUT]
    reader = metadata_of(served, LINEAGE, "alice", "joined", READ_TOKEN)
    assert reader["currentUpstreamDependencies"] == [
        _upstream("foo.bar", "ROOT"),
        _upstream(PRIVATE, "ROOT"),
        ABSENT_INPUT,
    ]
    assert anonymous["currentDownstreamDependencies"] == []


def test_downstream_lists_the_readers(served: Served) -> None:
    reader = {
        "__typename": "DependencyDatasetResultAccessible",
        "message": "Found",
        "dataset": {"alias": "alice/joined"},
    }
    assert metadata_of(served, LINEAGE, "kamu", "foo.bar") == {
        "currentUpstreamDependencies": [],
        "currentDownstreamDependencies": [reader],
    }
    private = metadata_of(served, LINEAGE, "kamu", PRIVATE, READ_TOKEN)
    assert private["currentDownstreamDependencies"] == [reader]
    status, answer = served.post(LINEAGE, variables={"account": "kamu", "name": PRIVATE})
    assert status == 200 and answer["data"]["datasets"]["byOwnerAndName"] is None


def test_graphql_answers_where_kamu_asks_under_a_stripped_prefix(served: Served) -> None:
    """``odf+https://host/odfd/`` + kamu-cli's appended segment, the prefix stripped by a proxy."""
    host = served.url.removeprefix("http://")
    for path in ("/graphql", "//graphql"):
        connection = http.client.HTTPConnection(host, timeout=60)
        connection.request(
            "POST",
            path,
            json.dumps({"query": "{ apiVersion }"}),
            {"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        assert (path, response.status) == (path, 200)
        assert json.loads(response.read()) == {"data": {"apiVersion": "0.1"}}
        connection.close()
