"""Spreading a burst of due syncs: the job runner's global and per-group limits and turn-taking,
and the mirror scheduler holding every peer to ``[sync] max_per_peer`` when a few hundred mirrors
on three loopback peers all fall due at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import replace
from pathlib import Path

import aiohttp
from aiohttp import web

from odfd.app.node import Node
from odfd.config import NodeConfig, SyncConfig
from odfd.daemon.jobs import JobRunner
from odfd.daemon.metrics import DaemonMetrics
from odfd.daemon.mirror_schedule import MirrorSchedule
from odfd.sync.transport.url import peer_key
from protocol.identity import DatasetId
from storage.workspace import Workspace


async def _until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    """Polls: the jobs under test signal nothing of their own."""
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 - nothing to wait on but the counts
            await asyncio.sleep(0.01)


async def test_groups_take_turns_within_both_limits() -> None:
    running: dict[str, int] = {"a": 0, "b": 0, "c": 0}
    peaks = dict(running)
    peak_total = 0
    started: list[str] = []

    async def job(key: Hashable) -> None:
        nonlocal peak_total
        group = str(key)[0]
        running[group] += 1
        started.append(group)
        peaks[group] = max(peaks[group], running[group])
        peak_total = max(peak_total, sum(running.values()))
        await asyncio.sleep(0.001)
        running[group] -= 1

    runner = JobRunner("test", job, limit=5, group_of=lambda key: str(key)[0], group_limit=2)
    runner.start()
    # A burst on one group queued first must not hold up the groups queued after it.
    keys = (
        [f"a{n}" for n in range(240)] + [f"b{n}" for n in range(40)] + [f"c{n}" for n in range(20)]
    )
    for key in keys:
        runner.run_now(key)
    await _until(lambda: len(started) == len(keys) and runner.running == 0)
    assert peaks == {"a": 2, "b": 2, "c": 2} and peak_total == 5
    assert {"b", "c"} <= set(started[:5])  # every group starts in the first round
    # While all three have work, a never runs more than its share: b's 40 and c's 20 are done
    # before a has run 100.
    assert started[:100].count("b") + started[:120].count("c") == 40 + 20
    await runner.close(0)


class _SlowPeers:
    """``count`` HTTP peers on loopback answering every request 404 after 100 ms, on a loop in a
    thread of their own (other nodes: their work is not the scheduler's loop's). Records the
    most mirrors each saw at once and the order in which they were first asked."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.peaks = dict.fromkeys(range(count), 0)
        self.first_seen: dict[int, int] = {}
        self._in_flight: dict[int, set[str]] = {peer: set() for peer in range(count)}
        self._requests = 0
        self._runners: list[web.AppRunner] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> list[int]:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    async def _start(self) -> list[int]:
        ports = []
        for peer in range(self.count):
            app = web.Application()
            app.router.add_get("/{tail:.*}", self._handler(peer))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self._runners.append(runner)
            ports.append(runner.addresses[0][1])
        return ports

    async def _stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def _handler(self, peer: int) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            self._requests += 1
            self.first_seen.setdefault(peer, self._requests)
            mirror = request.path.split("/")[1]
            self._in_flight[peer].add(mirror)
            self.peaks[peer] = max(self.peaks[peer], len(self._in_flight[peer]))
            try:
                await asyncio.sleep(0.1)
            finally:
                self._in_flight[peer].discard(mirror)
            return web.Response(status=404)

        return handle


async def test_a_burst_of_due_mirrors_is_held_to_the_per_peer_limit(tmp_path: Path) -> None:
    """45 mirrors on three loopback peers fall due at once; each peer answers slowly (404 after
    100 ms). No peer ever sees more than ``max_per_peer`` mirrors at a time, no more than
    ``max_concurrent`` run in all, and every peer is served from the start."""
    config = replace(NodeConfig(), sync=SyncConfig(max_concurrent=4, max_per_peer=1))
    moved: list[DatasetId] = []

    async def on_moved(dataset_id: DatasetId) -> None:
        moved.append(dataset_id)

    peers = _SlowPeers(3)
    with peers as ports:
        async with await Workspace.init(tmp_path / "ws") as workspace:
            metrics = DaemonMetrics()
            node = Node(workspace, config)
            schedule = MirrorSchedule(lambda: node, metrics, on_moved)
            failed = metrics.syncs.labels("failed")
            for n in range(45):
                source = f"http://127.0.0.1:{ports[n % 3]}/m{n}"
                await schedule.table.add(f"m.{n:03d}", source, (), 3600.0)
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit_per_host=config.sync.peer_connections)
            ) as session:
                schedule.session = session
                assert await schedule.load() == 45
                schedule.runner.start()
                await _until(lambda: failed._value.get() == 45, 60)
                await schedule.runner.close(0)
            failures = await workspace.catalog.sql.fetchall(
                "SELECT count(*) FROM sync_attempts WHERE outcome = 'failed'"
            )
    assert failures[0][0] == 45 and not moved  # every source is missing: each attempt failed
    assert peers.peaks == {0: 1, 1: 1, 2: 1}  # never two mirrors of one peer at once
    assert schedule.runner.peak_running == 3  # one per peer, below the global cap of 4
    assert max(peers.first_seen.values()) <= 3  # each peer got one of the first three requests


def test_peers_are_told_apart_by_host_and_port() -> None:
    assert peer_key("http://Node-A.example:8080/x") == "node-a.example:8080"
    assert peer_key("odf+https://node-a.example/y") == "node-a.example:443"
    assert peer_key("http://node-a.example/z") == "node-a.example:80"
    assert peer_key("ipns://k51abc/x") == peer_key("ipfs://bafy/x") == "ipfs"
    assert peer_key("file:///data/x") == "file"
