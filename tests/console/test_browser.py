"""The console in a real headless Chromium against a running daemon (in-process, on the
session's SparkSession) holding a mirror (``cities``, synced from a second workspace), two levels
of derivatives transformed from it, and a private dataset. Each test asserts on the page as
rendered after its scripts ran, checks the browser's console for errors, and saves a screenshot
under ``test-artifacts/console/``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import pytest
import pytest_asyncio
from selenium.webdriver.common.by import By

from odfd.app.node import Node as OdfdNode
from odfd.config import load_config
from odfd.coordinator.transform import update_derivative
from odfd.daemon.service import Daemon
from odfd.sync.pull import pull
from protocol.codec.yaml import load_snapshot
from protocol.identity import DidKey
from storage.catalog.audit_records import AuditRecord
from storage.catalog.audits import AuditTable
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.mirrors import MirrorTable
from storage.catalog.webhook_deliveries import WebhookDeliveryTable
from storage.workspace import Workspace
from tests.console.browser import Browser
from tests.console.pipelines import MIDDLE, ROOT, TOP, derivative
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG
from tests.query_api import verifier
from tests.replication.datagen import create_root

pytestmark = [pytest.mark.spark, pytest.mark.asyncio(loop_scope="module")]

T = TypeVar("T")
READ, ADMIN = "console-read-token", "console-admin-token"
SECRET = "secret.numbers"

CONFIG = (
    TEST_SPARK_CONFIG
    + f"""
[server]
private = ["secret.%"]
read_tokens = ["{READ}"]
admin_tokens = ["{ADMIN}"]
[sync]
startup_spread = "0s"
transform_derivatives = false
[audit]
after_sync = true
interval = "0s"
[daemon]
shutdown_timeout = "5s"
"""
)


@dataclass
class Node:
    daemon: Daemon
    workspace: Workspace
    browser: Browser

    @property
    def url(self) -> str:
        assert self.daemon.server_url is not None
        return f"{self.daemon.server_url}ui/"

    async def run(self, step: Callable[[Browser], T]) -> T:
        """Browser steps block: they run in a thread while the daemon serves on this loop."""
        return await asyncio.to_thread(step, self.browser)

    async def attempts(self) -> int:
        return len(await MirrorTable(self.workspace.catalog).attempts("cities"))


async def _eventually(what: str, probe: Callable[[], Awaitable[bool]], within: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await probe():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within:g} s waiting for {what}")
        await asyncio.sleep(0.2)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def node(spark: object, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Node]:
    base = tmp_path_factory.mktemp("console")
    async with (
        await Workspace.init(base / "source") as source,
        await Workspace.init(base / "node") as workspace,
    ):
        writer = await create_root(source, ROOT, slices=2, rows=10, seed=5)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        config_path = workspace.layout.config_path
        config_path.write_text(config_path.read_text() + CONFIG)
        await MirrorTable(workspace.catalog).add(ROOT, url, [], 3600.0)
        await pull(workspace, url, alias=ROOT)
        for name, inputs, query in (
            (MIDDLE, [ROOT], "SELECT event_time, upper(value) AS value FROM cities"),
            (TOP, [MIDDLE], "SELECT event_time, value FROM `cities.values` WHERE value > '8'"),
        ):
            dataset = await workspace.create_from_snapshot(
                load_snapshot(derivative(name, inputs, query), name)
            )
            await update_derivative(workspace, dataset, engines=TEST_ENGINES)
        await create_root(workspace, SECRET, slices=1, rows=5)
        daemon = Daemon(
            OdfdNode(workspace, load_config(config_path)),
            server_overrides={"address": "127.0.0.1", "port": 0},
        )
        await daemon.start()
        browser = await asyncio.to_thread(Browser)
        node = Node(daemon, workspace, browser)
        try:
            # The start-up sync of the mirror and the audits of every head have run.

            async def synced() -> bool:
                return await node.attempts() > 0

            async def idle() -> bool:
                runner = daemon.auditor.runner
                return runner.queued == 0 and runner.running == 0 and daemon.syncs.running == 0

            await _eventually("the start-up sync", synced)
            await _eventually("the start-up audits", idle)
            yield node
        finally:
            await asyncio.to_thread(browser.close)
            await daemon.shutdown()


def _fresh(browser: Browser, url: str, token: str | None = None) -> None:
    """A page of the console with no token (or ``token``) in this tab, its log emptied."""
    browser.open(url)
    browser.driver.execute_script(
        "sessionStorage.clear(); if (arguments[0]) sessionStorage.setItem("
        "'odfd-console-token', arguments[0]);",
        token,
    )
    browser.open(url)
    browser.driver.refresh()
    browser.wait_for("header.top")
    browser.console_errors()


async def test_datasets_page_lists_what_the_node_holds(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url)
        browser.wait("three dataset rows", lambda: len(browser.find("tr.dataset-row")) == 3)
        assert browser.attributes("tr.dataset-row", "data-alias") == [ROOT, TOP, MIDDLE]
        cells = browser.find(f'tr.dataset-row[data-alias="{ROOT}"] td')
        row = {h: c.text for h, c in zip(browser.texts("#datasets th"), cells, strict=True)}
        assert (row["KIND"], row["BLOCKS"], row["RECORDS"]) == ("Root", "4", "20")
        assert "lag 0" in row["MIRROR"] and "unchanged" in row["MIRROR"]
        assert row["AUDIT"] == "ok"
        assert row["IPNS"].startswith("…") and "never republished" in row["IPNS"]
        browser.find("#dataset-search")[0].send_keys("top")
        browser.wait("the search", lambda: browser.texts("#dataset-count") == ["1 dataset"])
        assert browser.attributes("tr.dataset-row", "data-alias") == [TOP]
        assert browser.console_errors() == []
        browser.screenshot("datasets")

    await node.run(step)


async def test_lineage_leads_from_a_derivative_to_its_input(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url + f"#/datasets/{TOP}/lineage")
        browser.wait("the graph", lambda: len(browser.find("svg#lineage .lineage-node")) == 3)
        assert sorted(browser.attributes("svg#lineage .lineage-node", "data-alias"), key=str) == [
            ROOT,
            TOP,
            MIDDLE,
        ]
        edges = {
            (e.get_attribute("data-from"), e.get_attribute("data-to"))
            for e in browser.find("svg#lineage path.lineage-edge")
        }
        assert edges == {(ROOT, MIDDLE), (MIDDLE, TOP)}
        # Laid out left to right: inputs before the datasets reading them.
        x = {
            n.get_attribute("data-alias"): n.find_element(By.TAG_NAME, "rect").rect["x"]
            for n in browser.find("svg#lineage .lineage-node")
        }
        assert x[ROOT] < x[MIDDLE] < x[TOP]
        browser.screenshot("lineage-top")
        browser.find(f'svg#lineage .lineage-node[data-alias="{MIDDLE}"] text')[0].click()
        browser.wait_for("#dataset-title", MIDDLE)
        # The previous graph has 3 nodes too: wait for the one drawn around the clicked dataset.
        browser.wait(
            f"the graph of {MIDDLE}",
            lambda: (
                len(browser.find(f'svg#lineage .lineage-node.current[data-alias="{MIDDLE}"]')) == 1
                and len(browser.find("svg#lineage .lineage-node")) == 3
            ),
        )
        browser.find(f'svg#lineage .lineage-node[data-alias="{ROOT}"] text')[0].click()
        # Not the title's text: "cities" is in "cities.values", the page it was clicked on.
        browser.wait_for(f'#tab-overview[href="#/datasets/{ROOT}/overview"]').click()
        assert browser.wait_for("#fact-name").text == ROOT
        assert browser.wait_for("#fact-records").text == "20"
        assert browser.console_errors() == []
        browser.screenshot("lineage-reached-input")

    await node.run(step)


async def test_overview_metadata_history_and_audits(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url + f"#/datasets/{MIDDLE}/overview")
        assert browser.wait_for("#fact-description").text == f"The {MIDDLE} dataset"
        assert "CC0-1.0" in browser.wait_for("#fact-license").text
        assert browser.wait_for("#readme").text.startswith(f"# {MIDDLE}")
        assert [c.text for c in browser.find("#schema tbody tr td:first-child")][-2:] == [
            "event_time",
            "value",
        ]
        browser.screenshot("overview")

        browser.find("#tab-metadata")[0].click()
        browser.wait("blocks", lambda: len(browser.find("#blocks details.block")) >= 5)
        sequences = browser.attributes("#blocks details.block", "data-sequence")
        assert sequences == [str(n) for n in range(len(sequences) - 1, -1, -1)]
        first = browser.find("#blocks details.block")[0]
        first.find_element(By.TAG_NAME, "summary").click()
        yaml = browser.wait("the block's YAML", lambda: first.find_element(By.TAG_NAME, "pre").text)
        assert "kind: ExecuteTransform" in yaml and "sequenceNumber: " in yaml
        browser.screenshot("metadata")

        browser.find("#tab-history")[0].click()
        bars = browser.wait("bars", lambda: browser.find("#history-chart rect.bar"))
        assert [b.get_attribute("data-records") for b in bars] == ["20"]
        browser.screenshot("history")

        browser.find("#tab-audits")[0].click()
        browser.wait_for("#audits details.audit")
        assert "integrity audit" in browser.texts("#audits details.audit summary")[0]
        assert browser.texts("#audits .pill")[0] == "ok"
        assert browser.console_errors() == []
        browser.screenshot("audits")

    await node.run(step)


async def test_sql_box_shows_rows(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url + f"#/datasets/{ROOT}/data", READ)
        browser.wait("latest rows", lambda: len(browser.find("#rows tbody tr")) == 20)
        assert browser.find("#rows tbody tr td")[0].text == "19"  # newest offset first
        box = browser.wait_for("#sql-query")
        # The box starts with a query in the dialect it runs in (DataFusion, as `odfd sql`):
        # run as it is, it answers with the newest rows.
        default = box.get_attribute("value")
        assert default == f'SELECT * FROM "{ROOT}" ORDER BY "offset" DESC LIMIT 10'
        assert "DataFusion" in browser.texts("#sql-help")[0]
        browser.find("#sql-run")[0].click()
        browser.wait_for("#sql-result tbody tr", timeout=60)
        assert [r.split(" ")[0] for r in browser.texts("#sql-result tbody tr")][:3] == [
            "19",
            "18",
            "17",
        ]
        assert "(datafusion)" in browser.texts("#sql-result p.muted")[0]
        box.clear()
        box.send_keys(f"SELECT offset, value FROM {ROOT} WHERE offset < 3 ORDER BY offset")
        browser.find("#sql-run")[0].click()
        browser.wait_for("#sql-result tbody tr", timeout=60)
        assert browser.texts("#sql-result thead th") == ["OFFSET", "VALUE"]
        assert [r.split(" ")[0] for r in browser.texts("#sql-result tbody tr")] == ["0", "1", "2"]
        assert browser.find("#sql-proof") == []
        assert browser.console_errors() == []
        browser.screenshot("sql")

        # With a proof: the same rows, and the signed answer behind them, shown and checkable.
        browser.find("#sql-with-proof")[0].click()
        browser.find("#sql-run")[0].click()
        browser.wait_for("#sql-proof summary", timeout=60)
        assert [r.split(" ")[0] for r in browser.texts("#sql-result tbody tr")] == ["0", "1", "2"]
        assert browser.texts("#sql-proof-signer") == [did]
        browser.find("#sql-proof summary")[0].click()
        answer = json.loads(browser.texts("#sql-proof-json")[0])
        verifier.check(answer)
        assert [row["offset"] for row in answer["output"]["data"]] == [0, 1, 2]
        assert browser.texts("#sql-proof-output") == [answer["commitment"]["outputHash"]]
        assert browser.console_errors() == []
        browser.screenshot("sql-proof")

    did = str(DidKey(bytes(node.workspace.keys.node_key().verify_key)))
    await node.run(step)


async def test_sync_now_needs_the_admin_token(node: Node) -> None:
    before = await node.attempts()

    def refused(browser: Browser) -> None:
        _fresh(browser, node.url + "#/mirrors")
        row = browser.wait_for(f'tr.mirror-row[data-name="{ROOT}"]')
        assert "unchanged" in row.text
        row.find_element(By.CSS_SELECTOR, "button.sync-now").click()
        assert "needs an admin token" in browser.wait_for(".error").text
        errors = browser.console_errors()
        assert len(errors) == 1 and "401" in errors[0]  # the refused request, nothing else
        browser.screenshot("sync-refused")

    await node.run(refused)
    await asyncio.sleep(1.0)
    assert await node.attempts() == before

    def accepted(browser: Browser) -> None:
        token = browser.find("#token")[0]
        token.send_keys(ADMIN)
        browser.find("#token-save")[0].click()
        row = browser.wait_for(f'tr.mirror-row[data-name="{ROOT}"]')
        row.find_element(By.CSS_SELECTOR, "button.sync-now").click()
        assert browser.wait_for("#action-notice").text == f"Sync of {ROOT} queued."
        assert browser.console_errors() == []
        browser.screenshot("sync-accepted")

    await node.run(accepted)

    async def synced_again() -> bool:
        return await node.attempts() > before

    await _eventually("the sync asked for", synced_again)


async def test_private_dataset_needs_a_token(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url)
        browser.wait("the list", lambda: len(browser.find("tr.dataset-row")) == 3)
        assert SECRET not in browser.attributes("tr.dataset-row", "data-alias")
        browser.open(node.url + f"#/datasets/{SECRET}/overview")
        browser.driver.refresh()
        # Told exactly what an unknown name is told: nothing reveals that it exists.
        assert browser.wait_for(".error").text == f"no dataset {SECRET} on this node"
        browser.screenshot("private-hidden")
        browser.console_errors()  # the refused request's 404
        _fresh(browser, node.url, READ)
        browser.wait("the list", lambda: len(browser.find("tr.dataset-row")) == 4)
        row = browser.wait_for(f'tr.dataset-row[data-alias="{SECRET}"]')
        assert "private" in row.text
        assert browser.console_errors() == []
        browser.screenshot("private-with-token")

    await node.run(step)


async def test_node_page(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url + "#/node")
        assert browser.wait_for("#node-daemon").text.startswith("running (pid ")
        browser.wait("metrics", lambda: len(browser.find("#metrics tbody tr")) > 5)
        names = {row.split(" ")[0] for row in browser.texts("#metrics tbody tr")}
        assert "odfd_datasets" in names
        assert "spark" in browser.wait_for("table.grid", "spark").text
        assert browser.console_errors() == []
        browser.screenshot("node")

    await node.run(step)


async def test_audit_report_shows_the_row_diff_of_a_divergence(node: Node) -> None:
    """A stored report of a reproducibility divergence (the verifier's document, as the daemon
    stores it) is rendered with its finding and both sides of the row sample."""
    record = await node.workspace.resolve(TOP)
    now = datetime.now(UTC)
    report = {
        "kind": "odfd.VerifyReport",
        "version": 1,
        "status": "failed",
        "datasets": [
            {
                "alias": TOP,
                "layers": {
                    "reproducibility": {
                        "status": "failed",
                        "findings": [
                            {
                                "status": "failed",
                                "rule": "logical-hash",
                                "message": "re-execution gives other records than recorded",
                                "block": {"sequenceNumber": 6, "hash": None},
                                "expected": "f9680aaaa",
                                "actual": "f9680bbbb",
                                "details": {
                                    "sample": {
                                        "limit": 5,
                                        "recordedOnly": [{"offset": 3, "value": "LYON"}],
                                        "recomputedOnly": [{"offset": 3, "value": "PARIS"}],
                                    }
                                },
                            }
                        ],
                    }
                },
            }
        ],
    }
    await AuditTable(node.workspace.catalog).add(
        AuditRecord(
            dataset_id=record.id,
            alias=TOP,
            scope="full",
            trigger="manual",
            head=record.head,
            started_at=now,
            finished_at=now,
            status="failed",
            summary="reproducibility failed",
            report=json.dumps(report),
        ),
        keep=20,
    )

    def step(browser: Browser) -> None:
        _fresh(browser, node.url + f"#/datasets/{TOP}/audits")
        failed = browser.wait_for("#audits details.audit", "reproducibility failed")
        assert failed.get_attribute("open") is not None  # failures open by themselves
        assert "logical-hash" in browser.wait_for(".finding").text
        tables = browser.find(".finding table.row-diff")
        assert [t.find_elements(By.CSS_SELECTOR, "td")[1].text for t in tables] == [
            "LYON",
            "PARIS",
        ]
        assert browser.texts(".finding h3") == ["Recorded only", "Recomputed only"]
        assert browser.console_errors() == []
        browser.screenshot("audit-divergence")

    await node.run(step)


async def test_audit_now_with_the_admin_token(node: Node) -> None:
    record = await node.workspace.resolve(MIDDLE)
    audits = AuditTable(node.workspace.catalog)
    before = len(await audits.history(record.id))

    def step(browser: Browser) -> None:
        _fresh(browser, node.url + f"#/datasets/{MIDDLE}/overview", ADMIN)
        browser.wait_for("#audit-now").click()
        notice = browser.wait_for(".notice").text
        assert notice == f"Audit of {MIDDLE} queued (integrity)."
        assert browser.console_errors() == []
        browser.screenshot("audit-now")

    await node.run(step)

    async def audited() -> bool:
        return len(await audits.history(record.id)) > before

    await _eventually("the audit asked for", audited, within=60)
    latest = (await audits.history(record.id, limit=1))[0]
    assert (latest.trigger, latest.scope, latest.status) == ("console", "integrity", "ok")


async def test_row_detail_shows_its_provenance(node: Node) -> None:
    def step(browser: Browser) -> None:
        _fresh(browser, node.url + f"#/datasets/{MIDDLE}/data", READ)
        browser.wait("latest rows", lambda: len(browser.find("#rows tbody tr")) == 20)
        newest = browser.find("#rows tbody tr")[0]
        offset = newest.find_elements(By.CSS_SELECTOR, "td")[0].text
        newest.click()
        browser.wait_for("#provenance-checked", timeout=120)
        rows = browser.find("#row-detail .provenance-row")
        assert rows[0].get_attribute("data-dataset") == MIDDLE
        assert rows[0].get_attribute("data-offset") == offset
        assert "checked" in rows[0].text and f"event_time ← {ROOT}.event_time" in rows[0].text
        # a projection: one witness, the root's row at the same offset, with its ingest
        witnesses = rows[1:]
        assert [
            (w.get_attribute("data-dataset"), w.get_attribute("data-offset")) for w in witnesses
        ] == [(ROOT, offset)]
        assert "ingested: committed without a declared source" in witnesses[0].text
        assert browser.console_errors() == []
        browser.screenshot("row-provenance")

    await node.run(step)


async def test_resources_flow_runs_and_deliveries(node: Node) -> None:
    """Resources applied over the daemon's resource protocol, a flow's run and a webhook
    delivery, as the Resources page shows them to a read token (and to nobody else); no secret
    appears in the page."""
    plain = "console-plain-secret"
    manifests: list[tuple[str, dict[str, Any]]] = [
        (
            "/config/v1alpha1/secretset",
            {"headers": {"name": "console-keys"}, "spec": {"secrets": {"token": plain}}},
        ),
        (
            "/sink/v1alpha1/webhooktarget",
            {
                "headers": {"name": "console.hook"},
                "spec": {"url": "http://127.0.0.1:9/hook", "secret": plain},
            },
        ),
        (
            "/flow/v1alpha1/flow",
            {
                "headers": {"name": "console-flow"},
                "spec": {
                    "target": "Dataset:%",
                    "triggers": [{"kind": "Schedule", "cron": "bad cron"}],
                    "tasks": [{"kind": "GarbageCollection"}],
                },
            },
        ),
    ]
    base = node.daemon.server_url
    assert base is not None
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        ids = {}
        for path, manifest in manifests:
            async with client.post(base.rstrip("/") + path, json=manifest) as response:
                body = await response.json()
                assert response.status == 201, body
                ids[body["headers"]["name"]] = body["headers"]["id"]
    assert body["status"]["phase"] == "Failed"  # the daemon's controller read the bad cron
    at = datetime(2026, 3, 1, tzinfo=UTC)
    runs = FlowRunTable(node.workspace.catalog)
    run_id = await runs.start(ids["console-flow"], "console-flow", "schedule", at)
    await runs.finish(run_id, "failed", at, "TaskError: console test")
    deliveries = WebhookDeliveryTable(node.workspace.catalog)
    await deliveries.start("msg_console", ids["console.hook"], "console.hook", "flow.run")
    await deliveries.attempted("msg_console", 503, "HTTP 503 Service Unavailable")
    await deliveries.finish("msg_console", "failed")

    def step(browser: Browser) -> None:
        _fresh(browser, node.url + "#/resources")
        assert "read and admin tokens" in browser.wait_for(".error").text
        browser.console_errors()  # the refused requests' 403s
        _fresh(browser, node.url + "#/resources", READ)
        row = browser.wait_for('tr.resource-row[data-name="console-flow"]')
        assert "Failed" in row.find_element(By.CSS_SELECTOR, ".phase").text
        assert "cron" in row.find_element(By.CSS_SELECTOR, ".conditions").text
        keys = browser.wait_for('tr.resource-row[data-name="console-keys"]')
        assert "Ready" in keys.text
        run = browser.wait_for('tr.run-row[data-flow="console-flow"]')
        assert "failed" in run.text and "TaskError: console test" in run.text
        delivery = browser.wait_for('tr.delivery-row[data-target="console.hook"]')
        assert "msg_console" in delivery.text and "503" in delivery.text
        assert plain not in browser.driver.page_source
        assert browser.console_errors() == []
        browser.screenshot("resources")

    await node.run(step)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        for path, manifest in manifests:
            name = manifest["headers"]["name"]
            async with client.delete(f"{base.rstrip('/')}{path}/{name}") as response:
                assert response.status == 200
