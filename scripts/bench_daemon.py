"""The daemon holding 10,000 mirrors: idle cost, memory, and a burst of 2,000 due at once.

Usage: python scripts/bench_daemon.py [--mirrors 10000] [--burst 2000] [--peers 4]
           [--concurrency 4] [--per-peer 2] [--idle-window 30] [--dir DIR]

Node A holds ``--burst`` small root datasets and is served by ``--peers`` ``odfd serve``
processes (loopback peers, each its own ``host:port``). Node B (an ``odfd daemon`` process) has
``--mirrors`` mirrors in its catalog, added through the catalog API as ``odfd mirror add`` does:
``--burst`` of them on A's datasets (spread over the peers), the rest on datasets that are never
due during the run (``every: 1h``, next run hours away). B also holds one local dataset it serves.

Measured, in this order:

- B's idle CPU with every mirror armed and none due: CPU time from ``/proc/<pid>/stat`` over
  ``--idle-window`` seconds, as a share of one core (target < 2%);
- the admin API's ``GET /status`` and the server's ``GET /metrics`` (time and size);
- the burst: the ``--burst`` mirrors are set due a few seconds ahead and B is told to reload
  (SIGHUP), so their timers all fire at one instant; each first sync pulls its dataset. Reported:
  how long the burst took, the outcomes (target: 0 failed), the most syncs that ran at once in
  all and against one peer (from the attempts B recorded), and B's CPU share meanwhile;
- serving during the burst: ``GET <dataset>/refs/head`` on B every 20 ms, p50/p99/max latency
  (target p99 < 100 ms), next to the same probe while idle;
- B's event-loop lag over the burst (``odfd_event_loop_lag_seconds`` from its ``/metrics``,
  sampled four times a second): how long any ready callback, such as a request, waited;
- B's peak RSS (``VmHWM``; no JVM: mirrors of root datasets need no Spark) (target < 512 MiB).

Audits after syncs are off (``[audit] after_sync = false``): they are the verifier's cost, which
``scripts/bench_verify.py`` measures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from _proc_cpu import process_cpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odfd.daemon.admin_client import AdminClient
from odfd.sync.transport.url import peer_key
from storage.catalog.columns import to_text
from storage.catalog.mirrors import MirrorTable
from storage.layout import WorkspaceLayout
from storage.workspace import Workspace
from tests.daemon.processes import DaemonProcess, ServeProcess, init_workspace
from tests.fixtures.proc_memory import memory_kib
from tests.replication.datagen import create_root

IDLE_CPU_TARGET = 0.02
RSS_TARGET_KIB = 512 * 1024
P99_TARGET_MS = 100.0
SERVED = "local.served"


async def _make_source(root: Path, count: int) -> list[str]:
    async with await Workspace.init(root) as workspace:
        aliases = []
        for n in range(count):
            alias = f"bench.{n:05d}"
            await create_root(workspace, alias, slices=1, rows=5, seed=n, checkpoints=False)
            aliases.append(alias)
        return aliases


async def _add_mirrors(root: Path, burst: list[str], peers: list[str], total: int) -> list[str]:
    """Every mirror, all due hours from now; returns the names of the burst's."""
    async with await Workspace.open(root) as workspace:
        await create_root(workspace, SERVED, slices=1, rows=5, seed=0, checkpoints=False)
        table = MirrorTable(workspace.catalog)
        names = []
        for n in range(total):
            peer = peers[n % len(peers)]
            if n < len(burst):
                name, source = f"m.{burst[n]}", f"{peer}{burst[n]}"
                names.append(name)
            else:
                name, source = f"m.idle.{n:05d}", f"{peer}idle.{n:05d}"
            await table.add(name, source, (), 3600.0)
        later = datetime.now(UTC) + timedelta(hours=6)
        await workspace.catalog.sql.executemany(
            "UPDATE mirrors SET next_run_at = ? WHERE name = ?",
            [
                (to_text(later + timedelta(seconds=random.uniform(0, 3600))), f"m.idle.{n:05d}")
                for n in range(len(burst), total)
            ]
            + [(to_text(later), name) for name in names],
        )
        return names


def _sql(root: Path, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        return db.execute(query, params).fetchall()


def _max_overlap(spans: list[tuple[datetime, datetime]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


async def _probe(url: str, stop: asyncio.Event) -> list[float]:
    """Latencies (ms) of ``GET url`` every 20 ms until ``stop``."""
    latencies: list[float] = []
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            started = time.perf_counter()
            async with session.get(url) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"GET {url}: HTTP {response.status}")
            latencies.append((time.perf_counter() - started) * 1000)
            try:
                await asyncio.wait_for(stop.wait(), 0.02)
            except TimeoutError:
                pass
    return latencies


def _percentiles(latencies: list[float]) -> str:
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return (
        f"p50 {cuts[49]:.1f} ms, p99 {cuts[98]:.1f} ms, max {max(latencies):.1f} ms "
        f"({len(latencies)} requests)"
    )


async def _probe_for(url: str, seconds: float) -> list[float]:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, stop.set)
    return await _probe(url, stop)


async def _admin_and_metrics(root: Path, server_url: str) -> str:
    client = await AdminClient.require(WorkspaceLayout(root), None)
    started = time.perf_counter()
    await client.request("GET", "/status")
    status_ms = (time.perf_counter() - started) * 1000
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        async with session.get(f"{server_url}metrics") as response:
            body = await response.read()
        metrics_ms = (time.perf_counter() - started) * 1000
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return (
        f"admin GET /status {status_ms:.0f} ms; GET /metrics {metrics_ms:.0f} ms, "
        f"{len(body)} bytes, {series} series"
    )


async def _lag_buckets(server_url: str) -> dict[float, float]:
    """B's ``odfd_event_loop_lag_seconds`` histogram: cumulative count per upper bound."""
    async with aiohttp.ClientSession() as session, session.get(f"{server_url}metrics") as response:
        text = await response.text()
    buckets = {}
    for line in text.splitlines():
        if line.startswith("odfd_event_loop_lag_seconds_bucket{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def _lag_summary(before: dict[float, float], after: dict[float, float]) -> str:
    counts = {bound: after[bound] - before.get(bound, 0.0) for bound in sorted(after)}
    total = counts[float("inf")]
    if not total:
        return "no samples"
    p99 = next(bound for bound, n in counts.items() if n >= 0.99 * total)
    over = ", ".join(
        f"{(total - counts[bound]) / total * 100:.1f}% over {bound * 1000:.0f} ms"
        for bound in (0.025, 0.05, 0.1, 0.5)
    )
    return f"{total:.0f} samples, {over}; p99 <= {p99 * 1000:.0f} ms"


async def _burst(
    root: Path, daemon: DaemonProcess, names: list[str], url: str
) -> tuple[float, list[float], float]:
    """Sets the burst due, waits until each of its mirrors recorded an attempt; returns the
    burst's seconds, the latencies probed meanwhile and B's CPU share."""
    due = datetime.now(UTC) + timedelta(seconds=3)
    await asyncio.to_thread(
        lambda: (
            sqlite3.connect(root / "catalog.sqlite", timeout=30)
            .executemany(
                "UPDATE mirrors SET next_run_at = ? WHERE name = ?",
                [(to_text(due), name) for name in names],
            )
            .connection.commit()
        )
    )
    daemon.signal(signal.SIGHUP)  # reload: re-arm every timer from the catalog
    await asyncio.sleep(max((due - datetime.now(UTC)).total_seconds(), 0))
    cpu_before, started = process_cpu(daemon.pid, children=False), time.monotonic()
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(url, stop))
    while True:
        [(attempts,)] = await asyncio.to_thread(_sql, root, "SELECT count(*) FROM sync_attempts")
        if isinstance(attempts, int) and attempts >= len(names):
            break
        if time.monotonic() - started > 3600:
            raise RuntimeError("the burst did not finish within an hour")
        await asyncio.sleep(0.5)
    elapsed = time.monotonic() - started
    cpu = (process_cpu(daemon.pid, children=False) - cpu_before) / elapsed
    stop.set()
    return elapsed, await probe, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mirrors", type=int, default=10_000)
    parser.add_argument("--burst", type=int, default=2_000)
    parser.add_argument("--peers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4, help="[sync] max_concurrent")
    parser.add_argument("--per-peer", type=int, default=2, help="[sync] max_per_peer")
    parser.add_argument("--idle-window", type=float, default=30.0)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    if args.burst > args.mirrors:
        parser.error("--burst cannot exceed --mirrors")
    work = args.dir or Path(tempfile.mkdtemp(prefix="odfd-bench-daemon-"))
    print(f"creating {args.burst} source datasets in {work / 'a'} ...", flush=True)
    aliases = asyncio.run(_make_source(work / "a", args.burst))
    peers = [ServeProcess(work / "a").start() for _ in range(args.peers)]
    b = DaemonProcess(work / "b", work / "b.log")
    try:
        init_workspace(
            work / "b",
            f"\n[sync]\nmax_concurrent = {args.concurrency}\nmax_per_peer = {args.per_peer}\n"
            'startup_spread = "0s"\n[audit]\nafter_sync = false\ninterval = "0s"\n'
            "[daemon]\nspark_connect = false\n",
        )
        print(f"adding {args.mirrors} mirrors to {work / 'b'} ...", flush=True)
        names = asyncio.run(
            _add_mirrors(work / "b", aliases, [peer.url for peer in peers], args.mirrors)
        )
        started = time.monotonic()
        b.start(timeout=600)
        print(f"daemon B started in {time.monotonic() - started:.1f} s", flush=True)
        time.sleep(15.0)  # start-up chores (reconcile, housekeeping, re-signing) settle
        url = f"{b.server_url}{SERVED}/refs/head"
        rss_idle = memory_kib(b.pid, "VmRSS")
        cpu_before, window_start = process_cpu(b.pid, children=False), time.monotonic()
        time.sleep(args.idle_window)
        idle_cpu = (process_cpu(b.pid, children=False) - cpu_before) / (
            time.monotonic() - window_start
        )
        idle_latencies = asyncio.run(_probe_for(url, 5.0))
        admin = asyncio.run(_admin_and_metrics(work / "b", b.server_url or ""))
        lag_before = asyncio.run(_lag_buckets(b.server_url or ""))
        elapsed, latencies, burst_cpu = asyncio.run(_burst(work / "b", b, names, url))
        lag = _lag_summary(lag_before, asyncio.run(_lag_buckets(b.server_url or "")))
        peak_rss = memory_kib(b.pid, "VmHWM")
        attempts = _sql(
            work / "b", "SELECT source, started_at, finished_at, outcome FROM sync_attempts"
        )
        outcomes: dict[str, int] = defaultdict(int)
        by_peer: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
        for source, start, finish, outcome in attempts:
            outcomes[str(outcome)] += 1
            span = (datetime.fromisoformat(str(start)), datetime.fromisoformat(str(finish)))
            by_peer[peer_key(str(source))].append(span)
        all_spans = [span for spans in by_peer.values() for span in spans]
        failed = outcomes.get("failed", 0)
        print(f"mirrors:               {args.mirrors} on {args.peers} loopback peers")
        print(
            f"idle CPU ({args.idle_window:g} s):      {idle_cpu * 100:.2f}% of a core = "
            f"{idle_cpu / IDLE_CPU_TARGET:.2f}x the 2% target"
        )
        print(f"RSS idle:              {rss_idle / 1024:.0f} MiB")
        print(f"{admin}")
        print(
            f"burst:                 {len(names)} due at once, done in {elapsed:.1f} s "
            f"= {len(names) / elapsed * 60:.0f} syncs/minute; outcomes "
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            + f"; {failed} failed"
        )
        print(
            f"spread:                at most {_max_overlap(all_spans)} syncs at once "
            f"(max_concurrent {args.concurrency}), at most "
            f"{max(_max_overlap(spans) for spans in by_peer.values())} on one peer "
            f"(max_per_peer {args.per_peer}); B's CPU meanwhile {burst_cpu * 100:.0f}% of a core"
        )
        print(f"GET refs/head, idle:   {_percentiles(idle_latencies)}")
        p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
        print(
            f"GET refs/head, burst:  {_percentiles(latencies)} = "
            f"{p99 / P99_TARGET_MS:.2f}x the 100 ms p99 target"
        )
        print(f"B's event-loop lag during the burst (and its reload): {lag}")
        print(
            f"peak RSS (daemon B):   {peak_rss / 1024:.0f} MiB = "
            f"{peak_rss / RSS_TARGET_KIB:.2f}x the 512 MiB target"
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    finally:
        b.stop()
        for peer in peers:
            peer.kill()


if __name__ == "__main__":
    main()
