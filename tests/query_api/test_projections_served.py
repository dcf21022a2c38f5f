"""``Projection`` resources are tables wherever datasets are: the HTTP query API (``/query`` and
``/verify``) and Flight SQL (``pyarrow.flight`` and the ADBC driver) read them under their names,
as ``odfd sql`` does, through the one registration of ``odfd.app.query``. A projection exists for
a caller exactly when the authorization decision lets them read every dataset it reads, and it
follows its inputs: a query after an ingest sees the new records."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from odfd.app.accounts import add_account, create_token
from odfd.app.node import Node
from odfd.app.resources import apply_manifests, load_manifests
from odfd.config import NodeConfig, ServerConfig
from odfd.flight_sql import endpoint
from odfd.flight_sql.workspace_queries import NodeQueries, token_resolver
from odfd.server.app import running
from odfd.server.query_api import query_api_mount
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.flight_sql.test_clients import anonymous_connection
from tests.flight_sql.test_protocol import Client, anonymous
from tests.query_api.conftest import call, install_test_key
from tests.query_api.datasets import grow
from tests.verifier.builders import root_with_slices

MANIFESTS = """\
$schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
headers:
  name: bob-shares
spec:
  relations:
    - {subject: 'Account:alice', relation: role, value: reader, object: 'Dataset:bob/secret'}
  attributes:
    - {object: 'Dataset:bob/secret', name: allowPublicRead, value: false}
---
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Projection
headers:
  name: open.latest
spec:
  inputs:
    - datasetRef: bob/open
  project:
    kind: Sql
    engine: datafusion
    query: select latest(value) as value, count(*) as records from "bob/open"
---
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Projection
headers:
  name: both.total
spec:
  inputs:
    - datasetRef: bob/open
    - datasetRef: bob/secret
  project:
    kind: Sql
    engine: datafusion
    query: |
      select (select sum(value) from "bob/open") + (select sum(value) from "bob/secret") as total
"""


@dataclass
class Site:
    http: str
    flight: str
    tokens: dict[str, str]
    loop: asyncio.AbstractEventLoop
    workspace: Workspace


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("projections-served") / "ws"

    async def serve(publish: Publish[Site], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            install_test_key(workspace)
            config = NodeConfig(server=ServerConfig(port=0))
            node = Node(workspace, config)
            for name in ("alice", "carol"):
                await add_account(node, name, password=None)
            await root_with_slices(workspace, "bob/open", [[1, 2, 3]])
            await root_with_slices(workspace, "bob/secret", [[10, 20]])
            manifest = Path(root) / "manifests.yaml"
            manifest.write_text(MANIFESTS)
            await apply_manifests(workspace, load_manifests([manifest]))
            tokens = {n: (await create_token(node, n)).secret for n in ("alice", "carol")}
            queries = NodeQueries(node)
            flight_sql = await endpoint.start(
                queries,
                address="127.0.0.1",
                port=0,
                resolve=token_resolver(workspace, config.server),
            )
            try:
                async with running(
                    workspace, config.server, mounts=[query_api_mount(node)]
                ) as http:
                    loop = asyncio.get_running_loop()
                    publish(Site(http.url, flight_sql.url, tokens, loop, workspace))
                    await stop.wait()
            finally:
                await flight_sql.stop()
                queries.close()

    with serve_in_thread("projections-node", serve) as site:
        yield site


def http_rows(site: Site, sql: str, token: str | None = None) -> list[list[object]]:
    reply = call(site.http, "POST", "/query", {"query": sql, "dataFormat": "JsonAoA"}, token=token)
    assert reply.status == 200, reply.body
    return reply.body["output"]["data"]


def test_a_projection_follows_its_inputs_over_http_and_flight_sql(site: Site) -> None:
    sql = 'select value, records from "open.latest"'
    flight = anonymous(site.flight)
    assert http_rows(site, sql) == [[3, 3]]
    assert flight.query(sql).to_pylist() == [{"value": 3, "records": 3}]
    with anonymous_connection(site.flight) as connection:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            assert cursor.fetch_arrow_table().to_pylist() == [{"value": 3, "records": 3}]

    asyncio.run_coroutine_threadsafe(grow(site.workspace, "bob/open", [7, 9]), site.loop).result(60)

    assert http_rows(site, sql) == [[9, 5]]
    assert flight.query(sql).to_pylist() == [{"value": 9, "records": 5}]
    # joined with the dataset it reads, in one query, on both surfaces
    joined = 'select count(*) as n from "bob/open" o join "open.latest" p on o.value = p.value'
    assert http_rows(site, joined) == [[1]]
    assert flight.query(joined).column("n").to_pylist() == [1]


def test_a_proof_over_a_projection_pins_its_inputs_and_verifies(site: Site) -> None:
    request = {"query": 'select value from "open.latest"', "include": ["Input", "Proof"]}
    reply = call(site.http, "POST", "/query", request)
    assert reply.status == 200, reply.body
    pinned = reply.body["input"]["datasets"]
    assert [dataset["alias"] for dataset in pinned] == ["bob/open"]
    # the input moves on; the proof still verifies: the projection is computed at the pinned block
    asyncio.run_coroutine_threadsafe(grow(site.workspace, "bob/open", [11]), site.loop).result(60)
    assert http_rows(site, 'select value from "open.latest"') == [[11]]
    proof = {key: value for key, value in reply.body.items() if key != "output"}
    checked = call(site.http, "POST", "/verify", proof)
    assert checked.status == 200 and checked.body["ok"] is True, checked.body


def test_a_projection_is_readable_by_who_may_read_every_input(site: Site) -> None:
    sql = 'select total from "both.total"'
    alice, carol = site.tokens["alice"], site.tokens["carol"]
    # bob/open moves in another test: its sum is read live
    [[open_sum]] = http_rows(site, 'select sum(value) from "bob/open"')
    expected = open_sum + 30  # type: ignore[operator]
    assert http_rows(site, sql, alice) == [[expected]]
    assert Client(site.flight, alice).query(sql).column("total").to_pylist() == [expected]
    listed = Client(site.flight, alice).fetch(Client(site.flight, alice).info("CommandGetTables"))
    assert {"both.total", "open.latest"} <= set(listed.column("table_name").to_pylist())

    # carol and anonymous callers may not read bob/secret: the projection is no table for them
    for token in (carol, None):
        reply = call(site.http, "POST", "/query", {"query": sql}, token=token)
        assert reply.status == 400 and "both.total" in reply.body["message"], reply.body
    for client in (Client(site.flight, carol), anonymous(site.flight)):
        with pytest.raises(pa.ArrowException, match="table 'both.total' not found"):
            client.query(sql)
        names = client.fetch(client.info("CommandGetTables")).column("table_name").to_pylist()
        assert "open.latest" in names and "both.total" not in names
