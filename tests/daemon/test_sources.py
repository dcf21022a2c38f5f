"""``Source`` resources end to end: the spec's polling example behind a local HTTP server that
wants the bearer token from a SecretSet, fed by its cron flow; the published chain, the run
records, the logs and ``odfd get`` hold no URL, header or secret of the source; the same input
gives the same data as the equivalent in-metadata source; a bad reference or a refused request
is a precise, redacted failure."""

from __future__ import annotations

import http.server
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from odfd.app.node import Node
from odfd.app.resource_types import FLOW, SOURCE
from odfd.app.resources import RECONCILE_ERROR, resource_document
from odfd.app.value_refs import ResolvedValues
from odfd.config import NodeConfig
from odfd.coordinator.ingest import ingest_external, pull_root
from odfd.flows.runner import FAILING, LAST_RUN, BackOff, FlowRunner
from odfd.flows.tasks import NodeTasks, WorkspaceTargets
from odfd.sources.ingest import SOURCE_STATE
from odfd.sources.render import polling_source
from odfd.sources.spec import SourceDefinition
from odfd.webhooks.delivery import WebhookDeliverer
from protocol.model import AddData, Timestamp
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.resources import ResourceTable
from storage.catalog.webhook_deliveries import WebhookDeliveryTable
from storage.workspace import Workspace
from tests.fixtures.local_http import answer_with_etag, serving
from tests.fixtures.resources import apply_and_reconcile_files, stored
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).parents[1] / "fixtures" / "spec_examples" / "source-polling-url"
API_KEY = "sk-live-4f9a1c0e7b2d-PRIVATE"
T0 = datetime(2026, 3, 2, 10, 7, tzinfo=UTC)
CSV = "date,FXAUDCAD,FXUSDCAD\n2024-01-02,0.9012,1.3316\n2024-01-03,0.9034,1.3345\n"


class _Api(http.server.BaseHTTPRequestHandler):
    """The bank's API: the data only with the right bearer token and key, with an ETag."""

    seen: list[str] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {API_KEY}" or API_KEY not in self.path:
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b"bad token")
            return
        answer_with_etag(self, '"v1"', CSV.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    with serving(_Api) as base:
        yield base


def example_manifests(folder: Path, api: str, api_key: str = API_KEY) -> None:
    """The spec's ``source-polling-url`` example, adapted: the URL on loopback (and carrying the
    key as a query parameter too, so a URL in a message would leak it), the decimals' precision
    and scale the right way round (the example has scale 19 > precision 6), ``offset`` Int64 as
    the reference writes it (the example declares UInt64, which ingest refuses precisely), the
    Ledger's key the column the preprocess step produces; plus the SecretSet and VariableSet it
    references."""
    for name in ("dataset.yaml", "flow.yaml", "source.yaml"):
        text = (EXAMPLES / name).read_text()
        text = text.replace("scale: 19\n", "scale: 6\n").replace(
            "precision: 6\n", "precision: 19\n"
        )
        text = text.replace("https://www.bankofcanada.ca", api).replace("UInt64", "Int64")
        text = text.replace(
            "csv?start_date=${{ config.startDate }}",
            "csv?start_date=${{ config.startDate }}&key=${{ config.apiKey }}",
        )
        text = text.replace("primaryKey:\n      - date", "primaryKey:\n      - event_time")
        (folder / name).write_text(text)
    (folder / "secrets.yaml").write_text(
        "$schema: SecretSet\nheaders: {name: ca.bankofcanada}\n"
        f"spec:\n  secrets:\n    apiKey: {api_key}\n"
    )
    (folder / "vars.yaml").write_text(
        "$schema: VariableSet\nheaders: {name: ca.bankofcanada}\n"
        "spec:\n  variables:\n    startDate: '2024-01-01'\n"
    )


@dataclass
class Env:
    workspace: Workspace
    node: Node
    folder: Path
    clock: list[datetime]
    runner: FlowRunner
    resources: ResourceTable
    runs: FlowRunTable

    async def apply(self) -> None:
        await apply_and_reconcile_files(self.workspace, self.folder)

    async def record(self, schema: str, name: str) -> Any:
        return await stored(self.resources, schema, name)


@pytest.fixture
async def env(tmp_path: Path, spark: object) -> AsyncIterator[Env]:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        node = Node(workspace, NodeConfig(), engines=TEST_ENGINES)
        resources = ResourceTable(workspace.catalog)
        runs = FlowRunTable(workspace.catalog)
        deliverer = WebhookDeliverer(WebhookDeliveryTable(workspace.catalog), resources)
        clock = [T0]
        runner = FlowRunner(
            resources,
            runs,
            NodeTasks(node, deliverer),
            WorkspaceTargets(node),
            clock=lambda: clock[0],
            back_off=BackOff(first=60),
        )
        folder = tmp_path / "m"
        folder.mkdir()
        yield Env(workspace, node, folder, clock, runner, resources, runs)


async def _chain_bytes(workspace: Workspace, alias: str) -> bytes:
    found = await workspace.catalog.find_by_alias(alias)
    assert found is not None
    folder = workspace.open_dataset(found.id)
    blocks = b""
    async for block_hash, _ in folder.chain.iter_blocks():
        blocks += await folder.chain.get_block_bytes(block_hash)
    assert folder.layout is not None  # and every file of the dataset's folder: data, refs, info
    for path in sorted(folder.layout.root.rglob("*")):
        if path.is_file():
            blocks += path.read_bytes()
    return blocks


async def test_cron_flow_polls_a_private_source_and_keeps_its_secrets(
    env: Env, api: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    example_manifests(env.folder, api)
    await env.apply()
    source = await env.record(SOURCE.schema, "ca.bankofcanada")
    assert source.status["phase"] == "Ready", source.status

    assert await env.runner.tick() == []  # the first tick learns the next cron time
    env.clock[0] = T0 + timedelta(minutes=30)
    [run_id] = await env.runner.tick()
    [run] = await env.runs.list()
    assert (run.run_id, run.state, run.error) == (run_id, "succeeded", None)
    assert _Api.seen[-1].endswith(f"start_date=2024-01-01&key={API_KEY}")

    found = await env.workspace.catalog.find_by_alias("ca.bankofcanada")
    assert found is not None
    dataset = env.workspace.open_dataset(found.id)
    events = [b.event async for _, b in dataset.chain.iter_blocks()]
    [added] = [e for e in events if isinstance(e, AddData)]
    assert added.new_data is not None and added.new_data.offset_interval.end == 1
    assert added.new_source_state is None  # kept with the resource instead
    kinds = {type(e).__name__ for e in events}
    assert not kinds & {"SetPollingSource", "AddPushSource"}
    chain = await _chain_bytes(env.workspace, "ca.bankofcanada")
    for private in (API_KEY, "127.0.0.1", "Authorization", "Bearer", "valet", "start_date"):
        assert private.encode() not in chain, private

    # The source state lives with the resource (so the next run asks If-None-Match).
    source = await env.record(SOURCE.schema, "ca.bankofcanada")
    state = source.status["conditions"][SOURCE_STATE]["datasets"][str(found.id)]
    assert state == {"kind": "odf/etag", "value": '"v1"'}
    env.clock[0] = T0 + timedelta(minutes=60)
    await env.runner.tick()
    assert [r.state for r in await env.runs.list()] == ["succeeded", "succeeded"]
    assert (
        len([e async for _, b in dataset.chain.iter_blocks() if isinstance(e := b.event, AddData)])
        == 1
    )

    shown = json.dumps([resource_document(r) for r in await env.resources.list()]) + "".join(
        str(r) for r in await env.runs.list()
    )
    assert API_KEY not in shown
    assert API_KEY not in caplog.text


async def test_refused_request_fails_the_run_without_the_secret(env: Env, api: str) -> None:
    example_manifests(env.folder, api, api_key="sk-wrong-key-93b1")
    await env.apply()
    assert await env.runner.tick() == []
    env.clock[0] = T0 + timedelta(minutes=30)
    await env.runner.tick()
    [run] = await env.runs.list()
    assert run.state == "failed" and run.error is not None
    assert "401" in run.error and "key=***" in run.error, run.error
    assert "sk-wrong-key-93b1" not in run.error
    flow = await env.record(FLOW.schema, "ca.bankofcanada")
    assert "sk-wrong-key-93b1" not in json.dumps(flow.status)
    assert flow.status["conditions"][FAILING]["consecutiveFailures"] == 1
    assert flow.status["conditions"][LAST_RUN]["state"] == "failed"


async def test_a_missing_secret_key_is_named_in_the_condition(env: Env, api: str) -> None:
    example_manifests(env.folder, api)
    (env.folder / "secrets.yaml").write_text(
        "$schema: SecretSet\nheaders: {name: ca.bankofcanada}\nspec:\n  secrets:\n    otherKey: x\n"
    )
    await env.apply()
    source = await env.record(SOURCE.schema, "ca.bankofcanada")
    assert source.status["phase"] == "Failed"
    condition = source.status["conditions"][RECONCILE_ERROR]
    assert condition["code"] == "unresolved-reference"
    assert condition["message"] == (
        "Source ca.bankofcanada: spec.config.apiKey: SecretSet:ca.bankofcanada has no key apiKey"
    )


async def test_same_data_as_the_equivalent_in_metadata_source(env: Env, api: str) -> None:
    example_manifests(env.folder, api)
    await env.apply()
    record = await env.record(SOURCE.schema, "ca.bankofcanada")
    source = SourceDefinition.from_record(record)
    values = ResolvedValues({"apiKey": API_KEY, "startDate": "2024-01-01"}, frozenset({API_KEY}))
    polling = polling_source(source, values)
    url = f"{api}/valet/observations/group/FX_RATES_DAILY/csv?start_date=2024-01-01&key={API_KEY}"
    in_metadata = await create(
        env.workspace,
        f"""
kind: DatasetSnapshot
version: 1
content:
  name: in-metadata
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Url
        url: "{url}"
        headers:
          - name: Authorization
            value: Bearer {API_KEY}
      read: {json.dumps(record.spec["read"])}
      preprocess: {json.dumps(record.spec["preprocess"])}
      merge: {json.dumps(record.spec["merge"])}
""",
    )
    at = Timestamp.of(2026, 3, 2)
    [reference] = await pull_root(env.workspace, in_metadata, engines=TEST_ENGINES, system_time=at)
    resource_fed = await create(
        env.workspace,
        "kind: DatasetSnapshot\nversion: 1\ncontent: {name: fed, kind: Root, metadata: []}\n",
    )
    outcome, state = await ingest_external(
        env.workspace, resource_fed, polling, None, engines=TEST_ENGINES, system_time=at
    )
    assert state is not None and state.value == '"v1"'
    assert outcome.num_records == reference.num_records == 2

    async def data(dataset: Any) -> Any:
        [slice_] = [
            b.event.new_data
            async for _, b in dataset.chain.iter_blocks()
            if isinstance(b.event, AddData)
        ]
        return slice_.logical_hash, slice_.offset_interval

    assert await data(resource_fed) == await data(in_metadata)
