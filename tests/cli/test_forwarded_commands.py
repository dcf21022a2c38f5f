"""The daemon's side of forwarded commands (``odfd.daemon.commands``), in process: a client's
typed request runs as a task of the daemon's loop on the daemon's node, its events and result
come back as frames the command's renderer prints, its failures as a local run reports them,
and a cancel (the client's Ctrl-C) cancels the task and the engine work it started. The whole
path through a real ``odfd daemon`` and Spark is ``tests/cli/test_via_daemon.py``."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from odfd.app.events import event_from_json
from odfd.app.forwarding import FORWARDED, PROTOCOL, Request
from odfd.app.ingest import IngestFile, IngestRequest
from odfd.app.node import Node, open_node
from odfd.app.provenance import ProvenanceRequest
from odfd.app.pull import PullRequest
from odfd.app.sql import EVENTS, SqlRequest
from odfd.app.verify import VerifyRequest, verify
from odfd.cli import via_daemon
from odfd.cli.commands import verify as verify_command
from odfd.daemon import commands
from odfd.daemon.commands import CommandRunner
from protocol.identity import DatasetId
from tests.query_api import verifier as answer_verifier
from tests.replication.datagen import create_root
from tests.verifier.builders import root_with_slices
from verifier.engine.cancel import current_scope
from verifier.progress import Progress, Titled

REQUESTS: list[Request] = [
    IngestRequest("a", (IngestFile("/data/1.csv", "1.csv"),), "src", "2024-01-01T00:00:00Z"),
    PullRequest(("a", "b"), recursive=True, connect_timeout=2.5, min_rate=0),
    VerifyRequest(("a",), integrity_only=True, from_block="3", jobs=2),
    SqlRequest(("SELECT 1", "SELECT 2"), "datafusion", "json", None, "2024-01-01T00:00:00Z"),
    ProvenanceRequest("d", offsets=(1, 2), depth=1),
]


def test_every_forwarded_command_has_a_request_whose_json_form_round_trips() -> None:
    assert {request.command for request in REQUESTS} == FORWARDED
    for request in REQUESTS:
        wire = json.loads(json.dumps(request.to_json()))
        assert type(request).from_json(wire) == request


def test_a_request_of_the_wrong_shape_is_refused_by_its_type() -> None:
    with pytest.raises(ValueError, match="statements"):
        SqlRequest.from_json({"engine": "datafusion", "output": "json"})
    with pytest.raises(ValueError, match="jobs: expected int"):
        VerifyRequest.from_json({"datasets": ["a"], "jobs": "2"})


@dataclass
class Recorded:
    """A command's rendering that keeps what it was given."""

    events: list[Any] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)

    def event(self, data: dict[str, Any]) -> None:
        self.events.append(event_from_json(data, EVENTS))

    def result(self, data: Any) -> int:
        self.results.append(data)
        return 0


@dataclass
class Served:
    node: Node
    runner: CommandRunner
    socket: Path

    async def send(self, request: Request, rendering: Any, root: Path | None = None) -> int:
        def run() -> int:
            session = via_daemon._Session(self.socket, via_daemon._connection(self.socket))
            try:
                return session.run(request, rendering, root or self.node.root)
            finally:
                session.close()

        return await asyncio.to_thread(run)


@pytest.fixture
async def served(empty_root: Path, tmp_path: Path) -> AsyncIterator[Served]:
    node = await open_node(empty_root)
    runner = CommandRunner(lambda: node)
    runner.ready = True
    app = web.Application()
    for method, path, handler in runner.routes():
        app.router.add_route(method, path, handler)
    site_runner = web.AppRunner(app)
    await site_runner.setup()
    socket = tmp_path / "admin.sock"
    await web.UnixSite(site_runner, str(socket)).start()
    try:
        yield Served(node, runner, socket)
    finally:
        await runner.close(5)
        await site_runner.cleanup()
        await node.close()


async def test_a_query_runs_on_the_daemons_node_and_its_result_comes_back(served: Served) -> None:
    shown = Recorded()
    request = SqlRequest(("SELECT 1 AS one", "SELECT 'x' AS s"), "datafusion", "json")
    assert await served.send(request, shown) == 0
    assert [event.text for event in shown.events] == ['[\n {"one": 1}\n]\n', '[\n {"s": "x"}\n]\n']
    assert shown.results == [None]
    assert served.runner.jobs == {}


async def test_a_failure_comes_back_as_a_local_run_reports_it(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    request = VerifyRequest(("no.such.dataset",))
    assert await served.send(request, Recorded()) == 2  # VerifyTargetNotFound's exit code
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no.such.dataset" in err and err.count("\n") == 1


async def test_a_request_for_another_workspace_is_refused(served: Served, tmp_path: Path) -> None:
    with pytest.raises(via_daemon._Refused, match="serves the workspace"):
        await served.send(SqlRequest(("SELECT 1",), "datafusion", "json"), Recorded(), tmp_path)
    assert served.runner.jobs == {}


async def test_a_cancel_ends_the_task_and_its_engine_work(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started = asyncio.Event()
    engine_cancelled = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def endless(node: Node, request: Request, sink: Any) -> None:
        scope = current_scope()
        assert scope is not None  # the command runs inside its own cancellation scope

        def cancel_engine_job() -> None:  # as the Spark engine cancels its job group
            loop.call_soon_threadsafe(engine_cancelled.set)

        scope.on_cancel(cancel_engine_job)
        started.set()
        await asyncio.Event().wait()

    monkeypatch.setitem(commands.USE_CASES, "sql", (SqlRequest, endless))
    sent = asyncio.create_task(
        served.send(SqlRequest(("SELECT 1",), "datafusion", "json"), Recorded())
    )
    await asyncio.wait_for(started.wait(), 10)
    (job,) = served.runner.jobs.values()
    cancel = await asyncio.to_thread(_post, served.socket, f"/run/{job.id}/cancel")
    assert cancel == {"cancelled": True}
    assert await asyncio.wait_for(sent, 10) == 130
    assert engine_cancelled.is_set()
    assert capsys.readouterr().err == "interrupted\n"
    assert served.runner.jobs == {}


def _post(socket: Path, path: str) -> Any:
    connection = via_daemon._connection(socket)
    try:
        connection.request("POST", path)
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


async def test_the_daemon_refuses_a_client_of_another_protocol(served: Served) -> None:
    def run() -> dict[str, Any]:
        connection = via_daemon._connection(served.socket)
        body = {"protocol": PROTOCOL - 1, "command": "sql", "request": {}, "env": {}}
        connection.request("POST", "/run", body=json.dumps(body))
        line = connection.getresponse().readline()
        connection.close()
        return dict(json.loads(line))

    frame = await asyncio.to_thread(run)
    assert frame["frame"] == "refused" and "protocol" in frame["reason"]


def test_names_spelled_out_for_light_parsing_are_the_real_ones() -> None:
    from odfd.app.query import DEFAULT_ENGINE
    from odfd.cli.commands import ingest, sql
    from odfd.ingest.formats import FORMATS

    assert ingest.INPUT_FORMATS == tuple(sorted(FORMATS))
    assert sql.DEFAULT_ENGINE == DEFAULT_ENGINE


async def test_what_a_killed_process_left_is_settled_and_said_as_a_local_run_says_it(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """A headless dataset folder untouched for ten minutes is removed before the command runs,
    with the ``Recovered:`` line a local run prints (``workspace_args.report_orphans``)."""
    _, dataset_id = DatasetId.new_generated()
    folder = served.node.workspace.layout.dataset(dataset_id).create().root
    then = time.time() - 600
    for item in [folder, *folder.rglob("*")]:
        os.utime(item, (then, then))
    shown = Recorded()
    assert await served.send(SqlRequest(("SELECT 1 AS one",), "datafusion", "json"), shown) == 0
    assert not folder.exists()
    err = capsys.readouterr().err
    assert f"Recovered: removed dataset folder {folder.name}: no refs/head" in err
    assert [event.text for event in shown.events] == ['[\n {"one": 1}\n]\n']


@dataclass
class Drawn(Progress):
    """The progress a renderer draws: each layer's label and what was checked in it."""

    layers: list[tuple[str, str, int | None]] = field(default_factory=list)
    checked: list[tuple[int, int]] = field(default_factory=list)
    ended: int = 0

    def begin(
        self, dataset: str, layer: Titled, *, blocks: int | None = None, bytes: int | None = None
    ) -> None:
        self.layers.append((dataset, layer.title, blocks))
        self.checked.append((0, 0))

    def advance(self, *, blocks: int = 0, bytes: int = 0) -> None:
        done_blocks, done_bytes = self.checked[-1]
        self.checked[-1] = (done_blocks + blocks, done_bytes + bytes)

    def end(self) -> None:
        self.ended += 1


async def test_a_forwarded_verify_draws_the_progress_a_local_run_draws(served: Served) -> None:
    await create_root(served.node.workspace, "kept", slices=2)
    request = VerifyRequest(("kept",))
    local = Drawn()
    report = await verify(served.node, request, local)
    assert report.exit_code == 0 and local.layers and local.ended == len(local.layers)
    assert all(blocks > 0 for blocks, _ in local.checked)

    rendering = verify_command.Rendering("text")
    rendering.progress = forwarded = Drawn()
    assert await served.send(request, rendering) == 0
    assert forwarded == local


async def test_a_forwarded_proof_is_the_signed_answer_a_local_run_prints(served: Served) -> None:
    """``odfd sql -o json --proof`` through the daemon: signed with the workspace's node key,
    which the daemon's node holds as a local run's does."""
    await root_with_slices(served.node.workspace, "nums", [[1, 2, 3]])
    shown = Recorded()
    sql = 'SELECT "offset", value FROM nums ORDER BY "offset"'
    request = SqlRequest((sql,), "datafusion", "json", proof=True, limit=2)
    assert await served.send(request, shown) == 0
    (event,) = shown.events
    answer = json.loads(event.text)
    answer_verifier.check(answer)  # canonical JSON, sha3-256, ed25519: nothing of odfd's
    assert answer["output"]["data"] == [{"offset": 0, "value": 1}, {"offset": 1, "value": 2}]
    assert answer["proof"]["verificationMethod"].startswith("did:key:z6Mk")  # ed25519
