"""A polling source over HTTP end to end: fetch with ETag, decompress, snapshot merge, source state."""

from __future__ import annotations

import gzip
import http.server
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.coordinator.ingest import ingest_push, pull_root
from odfd.ingest.errors import SourceError
from protocol.model import SourceState, Timestamp
from storage.workspace import Workspace
from tests.fixtures.local_http import answer_with_etag, serving
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events, rows, write

pytestmark = pytest.mark.spark


class _Server(http.server.BaseHTTPRequestHandler):
    version = 1
    bodies = {1: "id,name\n1,a\n2,b\n", 2: "id,name\n2,b\n3,c\n"}
    requests: list[str | None] = []

    def do_GET(self) -> None:
        etag = f'"v{type(self).version}"'
        type(self).requests.append(self.headers.get("If-None-Match"))
        body = gzip.compress(type(self).bodies[type(self).version].encode())
        answer_with_etag(self, etag, body, {"Last-Modified": "Mon, 01 Jul 2024 12:00:00 GMT"})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    with serving(_Server) as base:
        yield f"{base}/people.csv.gz"


async def test_http_snapshot_source_with_etag(workspace: Workspace, url: str) -> None:
    dataset = await create(
        workspace,
        f"""
kind: DatasetSnapshot
version: 1
content:
  name: people
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: {url}
        eventTime:
          kind: FromMetadata
      prepare:
        - kind: Decompress
          format: Gzip
      read:
        kind: Csv
        header: true
        schema:
          fields:
            - name: id
              type: int64
            - name: name
              type: string
      preprocess:
        kind: Sql
        engine: spark
        query: SELECT id, upper(name) AS name FROM input
      merge:
        kind: Snapshot
        primaryKey:
          - id
""",
    )
    _Server.version = 1
    [first] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 2), engines=TEST_ENGINES
    )
    assert first.num_records == 2
    [unchanged] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 3), engines=TEST_ENGINES
    )
    assert unchanged.up_to_date and unchanged.reason == "the source has not changed"
    _Server.version = 2
    [second] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 4), engines=TEST_ENGINES
    )
    assert second.num_records == 2
    assert _Server.requests[-3:] == [None, '"v1"', '"v1"']
    assert await rows(dataset, "offset", "op", "id", "name") == [
        (0, 0, 1, "A"),
        (1, 0, 2, "B"),
        (2, 1, 1, "A"),
        (3, 0, 3, "C"),
    ]
    events = await data_events(dataset)
    assert [e.new_source_state for e in events] == [
        SourceState(source_name="default", kind="odf/etag", value='"v1"'),
        SourceState(source_name="default", kind="odf/etag", value='"v2"'),
    ]
    assert [e.new_watermark for e in events] == [Timestamp.of(2024, 7, 1, 12)] * 2  # Last-Modified


async def test_push_sources_are_chosen_by_name(workspace: Workspace, tmp_path: Path) -> None:
    fields = """
          fields:
            - name: id
              type: int64"""
    dataset = await create(
        workspace,
        f"""
kind: DatasetSnapshot
version: 1
content:
  name: multi
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: csv
      read:
        kind: Csv
        schema:{fields}
      merge:
        kind: Append
    - kind: AddPushSource
      sourceName: json
      read:
        kind: NdJson
        schema:{fields}
      merge:
        kind: Append
""",
    )
    with pytest.raises(
        SourceError, match=r"several push sources \(csv, json\); choose one with --source-name"
    ):
        await ingest_push(
            workspace, dataset, write(tmp_path / "a.csv", "1\n"), engines=TEST_ENGINES
        )
    with pytest.raises(SourceError, match="has no polling source"):
        await pull_root(workspace, dataset, engines=TEST_ENGINES)
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "a.csv", "1\n"),
        source_name="csv",
        engines=TEST_ENGINES,
    )
    await ingest_push(
        workspace,
        dataset,
        write(tmp_path / "b.json", '{"id": 2}\n'),
        source_name="json",
        engines=TEST_ENGINES,
    )
    assert await rows(dataset, "offset", "id") == [(0, 1), (1, 2)]
