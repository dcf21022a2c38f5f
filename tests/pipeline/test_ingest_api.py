"""``POST /{dataset}/ingest`` on a real server, through real HTTP requests.

``test_push_ingest_handler`` restates the reference's ``test_data_push_ingest_handler``
(``src/adapter/http/tests/tests/test_data_ingest.rs``): its request bodies, status codes and the
records each request leaves behind (offsets, event times, values; odfd's own system time). The
others cover what that test leaves out: tokens, unknown datasets and media types, bad rows and
headers (each a 4xx with one message, the head unmoved), the event time header, Parquet, and the
route on a daemon's server.
"""

from __future__ import annotations

import asyncio
import io
import json
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.app.node import Node
from odfd.config import ServerConfig, load_config
from odfd.coordinator.commit import RUN_DIR
from odfd.daemon.service import Daemon
from odfd.server.app import running
from odfd.server.ingest_api import IngestApi
from odfd.server.state import STATE_KEY
from protocol.codec import yaml as odf_yaml
from protocol.identity import DatasetAliasPattern, DatasetId
from protocol.model import AddPushSource, Timestamp
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.daemon.loop_check import LoopBlockingCheck
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, rows

PUSH = "push-secret"
ADMIN = "admin-secret"
READ = "read-secret"

SOURCE1 = """\
kind: AddPushSource
sourceName: source1
read:
  kind: NdJson
  schema:
    fields:
      - {name: event_time, type: {kind: Timestamp, unit: Millisecond, timezone: UTC}}
      - {name: city, type: String}
      - {name: population, type: Int64}
merge:
  kind: Ledger
  primaryKey: [event_time, city]
"""

SOURCE2 = """\
kind: AddPushSource
sourceName: source2
read:
  kind: NdJson
  schema:
    fields:
      - {name: event_time, type: {kind: Timestamp, unit: Millisecond, timezone: UTC}}
      - {name: city, type: String}
      - {name: population, type: Int64}
preprocess:
  kind: Sql
  engine: datafusion
  queries:
    - query: select event_time, city, population + 1 as population from input
merge:
  kind: Ledger
  primaryKey: [event_time, city]
"""


def _snapshot(*events: str, name: str = "population") -> str:
    """The root dataset ``name`` made of ``events`` (YAML, each at column 0)."""
    items = "".join(
        f"    - {first}\n{textwrap.indent(rest, '      ')}"
        for first, _, rest in (event.partition("\n") for event in events)
    )
    head = f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: Root\n"
    return f"{head}  metadata:\n{items}"


@dataclass
class Served:
    url: str
    http: aiohttp.ClientSession
    dataset: Dataset
    withheld: set[DatasetId] = field(default_factory=set)
    """The server's datasets withheld (as a daemon withholds one whose audit failed)."""

    async def ingest(
        self,
        body: bytes | object,
        *,
        token: str | None = PUSH,
        content_type: str | None = "application/json",
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        path: str = "population",
    ) -> tuple[int, dict[str, object] | None]:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if content_type is not None:
            sent["Content-Type"] = content_type
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.http.post(
            f"{self.url}{path}/ingest", data=data, params=params or {}, headers=sent
        ) as response:
            text = await response.text()
            return response.status, json.loads(text) if text else None


def node_with_tokens(workspace: Workspace, **server_settings: Any) -> tuple[Node, ServerConfig]:
    """A node of ``workspace`` serving on any loopback port with this module's push, admin and
    read tokens (and ``server_settings``), and its server settings."""
    config = load_config(workspace.layout.config_path)
    server = replace(
        config.server,
        address="127.0.0.1",
        port=0,
        push_tokens=frozenset({PUSH}),
        admin_tokens=frozenset({ADMIN}),
        read_tokens=frozenset({READ}),
        **server_settings,
    )
    return Node(workspace, replace(config, server=server), engines=TEST_ENGINES), server


async def _served(workspace: Workspace) -> AsyncIterator[Served]:
    node, server = node_with_tokens(workspace)
    dataset = await create(workspace, _snapshot(SOURCE1))
    async with (
        running(workspace, server, mounts=[IngestApi(lambda: node)]) as running_server,
        aiohttp.ClientSession() as http,
    ):
        withheld = running_server.runner.app[STATE_KEY].withheld
        yield Served(running_server.url, http, dataset, withheld)


@pytest.fixture
async def served(workspace: Workspace) -> AsyncIterator[Served]:
    async for one in _served(workspace):
        yield one


async def _records(dataset: Dataset) -> list[tuple]:
    return await rows(dataset, "offset", "op", "event_time", "city", "population")


def _at(text: str) -> object:
    return Timestamp.parse_rfc3339(text).to_datetime()


@pytest.mark.spark
async def test_push_ingest_handler(served: Served) -> None:
    # OK - uses the only push source; the JSON array is transcoded for the NdJson source
    status, _ = await served.ingest(
        [
            {"event_time": "2020-01-01T00:00:00", "city": "A", "population": 100},
            {"event_time": "2020-01-02T00:00:00", "city": "B", "population": 200},
        ]
    )
    assert status == 200
    assert await _records(served.dataset) == [
        (0, 0, _at("2020-01-01T00:00:00Z"), "A", 100),
        (1, 0, _at("2020-01-02T00:00:00Z"), "B", 200),
    ]

    # add another source
    await served.dataset.commit_event(
        _source2(), expected_head=await served.dataset.chain.head(), system_time=Timestamp.now()
    )

    # ERR - now it needs to disambiguate
    head = await served.dataset.chain.head()
    status, body = await served.ingest(
        [{"event_time": "2020-01-03T00:00:00", "city": "D", "population": 300}]
    )
    assert status == 400
    assert body is not None and "several push sources" in str(body["message"])
    assert await served.dataset.chain.head() == head

    # OK - uses the named source (its preprocess adds one)
    status, _ = await served.ingest(
        [{"event_time": "2020-01-03T00:00:00", "city": "C", "population": 300}],
        params={"sourceName": "source2"},
    )
    assert status == 200
    assert (await _records(served.dataset))[2:] == [(2, 0, _at("2020-01-03T00:00:00Z"), "C", 301)]

    # ERR - invalid source
    head = await served.dataset.chain.head()
    status, body = await served.ingest(
        [{"event_time": "2020-01-04T00:00:00", "city": "D", "population": 400}],
        params={"sourceName": "source3"},
    )
    assert status == 400
    assert body == {"message": "population has no push source 'source3' (has: source1, source2)"}
    assert await served.dataset.chain.head() == head

    # OK - transcoding from CSV (no header: the source's schema names the columns)
    status, _ = await served.ingest(
        b"2020-01-04T00:00:00,D,400", content_type="text/csv", params={"sourceName": "source1"}
    )
    assert status == 200
    assert (await _records(served.dataset))[3:] == [(3, 0, _at("2020-01-04T00:00:00Z"), "D", 400)]


def _source2() -> AddPushSource:
    """``SOURCE2`` as an event."""
    event = odf_yaml.load_snapshot(_snapshot(SOURCE2).encode(), source="test").metadata[0]
    assert isinstance(event, AddPushSource)
    return event


EVENTS = """\
kind: AddPushSource
sourceName: default
read:
  kind: NdJson
  schema:
    fields:
      - {name: city, type: String}
      - {name: population, type: Int64}
merge:
  kind: Append
"""


async def test_refusals_name_the_problem_and_commit_nothing(
    served: Served, workspace: Workspace
) -> None:
    head = await served.dataset.chain.head()
    row = [{"event_time": "2020-01-01T00:00:00", "city": "A", "population": 100}]

    status, body = await served.ingest(row, token=None)
    assert (status, body) == (
        401,
        {
            "message": "ingesting needs a bearer token of an account that may write to the "
            "dataset (Authorization: Bearer …)"
        },
    )
    status, body = await served.ingest(row, token=READ)
    message = str((body or {}).get("message"))
    assert status == 403 and message.startswith("kamu may not ingest into ")
    assert "limited to read (read_tokens)" in message
    status, body = await served.ingest(row, path="nobody")
    assert (status, body) == (404, {"message": "no dataset nobody on this node"})
    status, body = await served.ingest(row, path="did:odf:fed0123")
    assert status == 404

    status, body = await served.ingest(b"<rows/>", content_type="application/xml")
    assert status == 415
    assert body is not None and str(body["message"]).startswith(
        "media type 'application/xml' is not supported; send one of text/csv, application/json"
    )
    status, _ = await served.ingest(b"\x00", content_type="application/octet-stream")
    assert status == 415

    status, body = await served.ingest(row, headers={"odf-event-time": "yesterday"})
    assert (status, body) == (
        400,
        {"message": "header odf-event-time: 'yesterday' is not an RFC 3339 timestamp"},
    )
    assert await served.dataset.chain.head() == head
    assert not list((workspace.root / RUN_DIR).glob("ingest-*"))

    assert served.dataset.id is not None
    served.withheld.add(served.dataset.id)
    status, body = await served.ingest(row)
    assert status == 403 and body is not None and "withheld" in str(body["message"])
    served.withheld.clear()
    assert await served.dataset.chain.head() == head

    # multi-tenant paths name the account too (an empty body adds nothing: answered at once)
    tenant = await create(workspace, _snapshot(SOURCE1, name="alice/population"))
    status, _ = await served.ingest(b"", content_type="text/csv", path="alice/population")
    assert status == 200 and await tenant.chain.head() is not None
    status, _ = await served.ingest(b"", content_type="text/csv", path="bob/population")
    assert status == 404


async def test_a_private_dataset_exists_only_for_tokens_that_read_it(workspace: Workspace) -> None:
    config = load_config(workspace.layout.config_path)
    server = replace(
        config.server,
        address="127.0.0.1",
        port=0,
        push_tokens=frozenset({PUSH}),
        admin_tokens=frozenset({ADMIN}),
        private=(DatasetAliasPattern.parse("population"),),
    )
    node = Node(workspace, replace(config, server=server), engines=TEST_ENGINES)
    dataset = await create(workspace, _snapshot(SOURCE1))
    async with (
        running(workspace, server, mounts=[IngestApi(lambda: node)]) as running_server,
        aiohttp.ClientSession() as http,
    ):
        served = Served(running_server.url, http, dataset)
        status, _ = await served.ingest(b"", token=PUSH)
        assert status == 404
        status, _ = await served.ingest(b"", token=ADMIN)  # nothing to add: answered at once
        assert status == 200
    assert await dataset.chain.head() is not None


@pytest.mark.spark
async def test_rows_that_break_the_schema_are_refused_whole(
    served: Served, workspace: Workspace
) -> None:
    head = await served.dataset.chain.head()
    status, body = await served.ingest(
        [
            {"event_time": "2020-01-01T00:00:00", "city": "A", "population": 100},
            {"event_time": "2020-01-02T00:00:00", "city": "B", "population": "many"},
        ]
    )
    assert status == 400, body
    assert body is not None and "population" in str(body["message"])
    status, body = await served.ingest(b'[{"city": "A",', content_type="application/json")
    assert status == 400
    assert body is not None and str(body["message"]).startswith("the request body, line 1")
    assert await served.dataset.chain.head() == head
    assert await _records(served.dataset) == []
    assert not list((workspace.root / RUN_DIR).glob("ingest-*"))


@pytest.mark.spark
async def test_event_time_header_parquet_and_an_admin_token(
    served: Served, workspace: Workspace
) -> None:
    events = await create(workspace, _snapshot(EVENTS, name="events"))
    status, body = await served.ingest(
        b'{"city": "A", "population": 1}\n{"city": "B", "population": 2}\n',
        content_type="application/x-ndjson",
        headers={"odf-event-time": "2021-05-05T10:00:00+02:00"},
        path="events",
    )
    assert status == 200, body
    table = pa.table({"city": ["C"], "population": pa.array([3], pa.int64())})
    parquet = io.BytesIO()
    pq.write_table(table, parquet)
    status, _ = await served.ingest(
        parquet.getvalue(),
        content_type="application/vnd.apache.parquet",
        headers={"odf-event-time": "2021-05-06T00:00:00Z"},
        token=ADMIN,
        path="events",
    )
    assert status == 200
    assert await rows(events, "offset", "event_time", "city", "population") == [
        (0, _at("2021-05-05T08:00:00Z"), "A", 1),
        (1, _at("2021-05-05T08:00:00Z"), "B", 2),
        (2, _at("2021-05-06T00:00:00Z"), "C", 3),
    ]


@pytest.mark.spark
async def test_the_daemon_serves_ingest(workspace: Workspace) -> None:
    config_path = workspace.layout.config_path
    config_path.write_text(
        config_path.read_text()
        + f'[server]\npush_tokens = ["{PUSH}"]\n[daemon]\nspark_connect = false\n'
    )
    dataset = await create(workspace, _snapshot(SOURCE1))
    daemon = Daemon(
        Node(workspace, load_config(config_path), engines=TEST_ENGINES),
        server_overrides={"address": "127.0.0.1", "port": 0},
    )
    await daemon.start()
    try:
        assert daemon.server_url is not None
        loop = asyncio.get_running_loop()
        with LoopBlockingCheck(loop, except_task_of="test_the_daemon_serves_ingest") as check:
            async with aiohttp.ClientSession() as http:
                served = Served(daemon.server_url, http, dataset)
                status, _ = await served.ingest(
                    b"2020-01-01T00:00:00Z,A,100\n", content_type="text/csv"
                )
        assert status == 200
        assert check.slow == [], check.report()  # the ingest ran off the daemon's event loop
        assert await _records(dataset) == [(0, 0, _at("2020-01-01T00:00:00Z"), "A", 100)]
    finally:
        await daemon.shutdown()
