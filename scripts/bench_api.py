#!/usr/bin/env python3
"""Benchmark of the HTTP query API against a real ``odfd daemon`` process, measured in one run.

1. A small ``/query`` (one row of a 300-row dataset) with 1 and 16 concurrent clients: p50 and
   p99; then the same asking for a proof (rendering, hashing and signing included).
   Targets: p50 <= 15 ms, p99 <= 50 ms. Beside each: the daemon's CPU per request (all its
   threads, and its event loop's), this client's, the p50 floor they imply on the machine's
   cores, and the share of the cores' time they had meanwhile (and how much was idle): a p50
   above the floor with no idle time is other processes' load, not queueing in the daemon.
2. ``GET /{dataset}/refs/head`` p99 while 4 clients keep running heavy queries (each until the
   daemon's query time limit stops it): transfers must not wait behind queries. Target: < 100 ms.
3. A 1,000,000-row ``SELECT *`` answered as JsonAoS (the client receiving the whole body), as a
   ratio to the same query executed by DataFusion in this process with its result written as
   JSON by DataFusion's own (Rust, arrow-json) writer (the fastest JSON export on the machine),
   and to DataFusion executing it plus pyarrow writing the rows as text (CSV: pyarrow has no
   JSON writer). Target: <= 1.5x. Printed for wall time and for CPU time (the daemon's, all its
   threads, against this process's while DataFusion executes and writes): on a shared machine
   the CPU ratio is the steady one. Then the same answer as JsonAoA, as JsonSoA and with the
   ArrowJson schema: the daemon's CPU for each against JsonAoS's (none should cost more).

Usage: ``.venv/bin/python scripts/bench_api.py [--rows 1000000] [--seconds 5] [--parts 1,2,3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import pyarrow.csv as pyarrow_csv
from _proc_cpu import process_cpu
from bench_engines import root_with, trades_table

from odfd.coordinator.query import dataset_view
from storage.workspace import Workspace
from tests.daemon.processes import DaemonProcess, init_workspace

LARGE = "big.trades"
SMALL = "few.trades"
SMALL_QUERY = f'SELECT symbol, price FROM "{SMALL}" WHERE seq = 7'
HEAVY_QUERY = "SELECT sum(value) FROM generate_series(1, 100000000000)"
CONFIG = """
[server]
query_timeout = "3s"
query_max_rows = {rows}
[daemon]
spark_connect = false
"""


async def setup(root: Path, rows: int) -> None:
    async with await Workspace.open(root) as workspace:
        workspace.keys.node_key()
        await root_with(workspace, LARGE, trades_table(rows, 1000))
        await root_with(workspace, SMALL, trades_table(300, 20))


SMALL_P50_TARGET_MS = 15.0
SMALL_P99_TARGET_MS = 50.0
HEAD_P99_TARGET_MS = 100.0
EXPORT_RATIO_TARGET = 1.5


def percentiles(latencies: list[float], p50_target: float | None, p99_target: float) -> str:
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    p50 = f"p50 {cuts[49]:6.1f} ms" + (
        ""
        if p50_target is None
        else f" (target <= {p50_target:g}, {verdict(cuts[49], p50_target)})"
    )
    p99 = f"p99 {cuts[98]:6.1f} ms (target <= {p99_target:g}, {verdict(cuts[98], p99_target)})"
    return f"{p50}   {p99}   ({len(latencies)} requests)"


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


async def timed_queries(
    session: aiohttp.ClientSession, url: str, body: dict[str, object], count: int
) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        async with session.post(f"{url}query", json=body) as response:
            await response.read()
            assert response.status == 200, await response.text()
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def idle_seconds() -> float:
    """The machine's idle time so far, all cores (``/proc/stat``: idle + iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


def daemon_cpu(pid: int, thread: int | None = None) -> float:
    """CPU seconds so far of the daemon (all its threads) or of one of its threads, without
    its children's (the Spark JVM a query could start is not the daemon's own work)."""
    return process_cpu(pid, thread, children=False)


@dataclass(frozen=True)
class ServerCpu:
    """CPU time per request, in ms: the daemon's whole process's, its event loop's (the main
    thread, which runs every request's handler one at a time), and this client's (its HTTP
    requests and responses, on the same cores as the daemon)."""

    process: float
    loop: float
    client: float
    share: float
    """The part of the machine's cores' time the daemon and this client used while the
    requests ran."""
    idle: float
    """The part of the machine's cores' time left idle meanwhile (the rest of ``1 - share``
    went to other processes): idle cores while requests wait mean queueing in the daemon."""


async def settle(pid: int, seconds: float = 60.0) -> None:
    """Wait until the daemon is idle (under 2% of a core over half a second): what it does
    after starting (its first scans and syncs) would be counted as the queries' CPU."""
    ended = time.monotonic() + seconds
    while time.monotonic() < ended:
        used = daemon_cpu(pid)
        await asyncio.sleep(0.5)
        if daemon_cpu(pid) - used < 0.01:
            return


async def small_queries(
    url: str, clients: int, proof: bool, per_client: int, pid: int
) -> tuple[list[float], ServerCpu]:
    """The latencies, and the daemon's CPU time per request."""
    body: dict[str, object] = {"query": SMALL_QUERY}
    if proof:
        body["include"] = ["Proof"]
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await timed_queries(session, url, body, 3)  # warm up: connections, the plan cache
        used, looped, client = daemon_cpu(pid), daemon_cpu(pid, pid), time.process_time()
        started, idle = time.perf_counter(), idle_seconds()
        runs = [timed_queries(session, url, body, per_client) for _ in range(clients)]
        latencies = [latency for run in await asyncio.gather(*runs) for latency in run]
        wall, idle = time.perf_counter() - started, idle_seconds() - idle
        used, looped = daemon_cpu(pid) - used, daemon_cpu(pid, pid) - looped
        client = time.process_time() - client
    per_request = 1000 / len(latencies)
    cores = os.cpu_count() or 1
    share = (used + client) / (wall * min(clients, cores))
    return latencies, ServerCpu(
        used * per_request, looped * per_request, client * per_request, share, idle / (wall * cores)
    )


def floor_note(cpu: ServerCpu, clients: int) -> str:
    """What the CPU a request costs the daemon implies for the median with ``clients`` clients
    kept busy: at best ``clients`` requests share the machine's cores, and their handlers
    share the one event loop thread."""
    cores = os.cpu_count() or 1
    shared = clients * cpu.process / min(clients, cores)
    looped = clients * cpu.loop
    both = clients * (cpu.process + cpu.client) / min(clients, cores)
    return (
        f"daemon CPU {cpu.process:.2f} ms/request ({cpu.loop:.2f} on its event loop); with "
        f"{clients} clients on {cores} cores the p50 floor is max({clients} x {cpu.process:.2f}"
        f" / {min(clients, cores)}, {clients} x {cpu.loop:.2f}) = {max(shared, looped):.1f} ms"
        f"\n      with this client's CPU ({cpu.client:.2f} ms/request) on the same cores: "
        f"{clients} x ({cpu.process:.2f} + {cpu.client:.2f}) / {min(clients, cores)} = {both:.1f} ms"
        f"\n      they had {cpu.share:.0%} of those cores' time meanwhile ({cpu.idle:.0%} idle, "
        f"the rest other processes'): a mean latency of {both / max(cpu.share, 0.01):.1f} ms"
    )


async def head_under_load(url: str, seconds: float) -> tuple[list[float], int]:
    stop = asyncio.Event()
    stopped = 0

    async def heavy(session: aiohttp.ClientSession) -> None:
        nonlocal stopped
        while not stop.is_set():
            async with session.post(f"{url}query", json={"query": HEAVY_QUERY}) as response:
                await response.read()
                stopped += response.status == 400

    async with aiohttp.ClientSession() as session:
        loaders = [asyncio.create_task(heavy(session)) for _ in range(4)]
        await asyncio.sleep(0.5)  # the heavy queries are running
        latencies = []
        ended = time.monotonic() + seconds
        while time.monotonic() < ended:
            started = time.perf_counter()
            async with session.get(f"{url}{SMALL}/refs/head") as response:
                await response.read()
                assert response.status == 200
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*loaders)
    return latencies, stopped


EXPORTS: dict[str, dict[str, object]] = {
    "JsonAoS": {"dataFormat": "JsonAoS"},
    "JsonAoA": {"dataFormat": "JsonAoA"},
    "JsonSoA": {"dataFormat": "JsonSoA"},
    "JsonAoS + ArrowJson schema": {"dataFormat": "JsonAoS", "schemaFormat": "ArrowJson"},
}
"""The large answer in each layout, and with a schema, keyed by label."""


async def large_export(
    url: str, rows: int, pid: int, options: dict[str, object], out: Path
) -> tuple[float, int, float]:
    """Seconds until the client has written the whole body to ``out``, its size, and the
    daemon's CPU seconds meanwhile. The client writes the body to a file as it arrives, as
    ``curl -o`` does and as DataFusion's side writes its JSON to a file, rather than gathering
    146 MB into one object (``read()``): that join cost the client ~0.15 s CPU, on the 2 cores
    the daemon needs, and DataFusion's side has nothing like it."""
    body = {"query": f'SELECT * FROM "{LARGE}"', "limit": rows, **options}
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        used = daemon_cpu(pid)
        started = time.perf_counter()
        async with session.post(f"{url}query", json=body) as response:
            size, head, last = 0, b"", b""
            with out.open("wb") as file:
                async for data, _ in response.content.iter_chunks():
                    head = head or bytes(data[:500])
                    size += file.write(data)
                    last = data[-1:] or last
            assert response.status == 200, head
            assert head[:1] == b"{" and last == b"}", "the body is not one whole JSON object"
        return time.perf_counter() - started, size, daemon_cpu(pid) - used


async def engine_export(root: Path, scratch: Path) -> tuple[float, float, float, float]:
    """DataFusion in this process: executing the query alone, executing it with the result
    written as JSON by its own writer, and pyarrow writing the result as text (CSV: pyarrow has
    no JSON writer), in seconds; and the CPU seconds of executing and writing JSON."""
    from protocol.model import SqlQueryStep
    from verifier.engine.contract import QueryTable
    from verifier.engine.datafusion.engine import DataFusionEngine, new_context

    async with await Workspace.open(root) as workspace:
        record = await workspace.try_resolve(LARGE)
        assert record is not None
        view = await dataset_view(workspace.open_dataset(record.id))
    table = QueryTable(view.alias, view.paths, view.schema)
    sql = f'SELECT * FROM "{LARGE}"'
    started = time.perf_counter()
    result = DataFusionEngine().query([SqlQueryStep(query=sql)], [table])
    execute = time.perf_counter() - started
    started = time.perf_counter()
    pyarrow_csv.write_csv(result, io.BytesIO())
    text = time.perf_counter() - started

    context = new_context()
    context.register_parquet("big", str(view.paths[0]), file_extension="")
    out = scratch / "export.json"
    used = time.process_time()
    started = time.perf_counter()
    context.sql('SELECT * FROM "big"').write_json(str(out))
    written = time.perf_counter() - started
    return execute, written, text, time.process_time() - used


def best(runs: list[float]) -> float:
    return min(runs)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--per-client", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--parts", default="1,2,3", help="which of the measurements to run (comma-separated)"
    )
    args = parser.parse_args()
    parts = {int(part) for part in args.parts.split(",")}

    work = Path(tempfile.mkdtemp(prefix="odfd-bench-api-"))
    root = work / "ws"
    daemon = None
    try:
        await asyncio.to_thread(init_workspace, root, CONFIG.format(rows=args.rows))
        await setup(root, args.rows)
        daemon = await asyncio.to_thread(DaemonProcess(root, work / "daemon.log").start, 120)
        url = daemon.server_url
        assert url is not None
        print(f"daemon at {url}; {args.rows:,} rows in {LARGE}")

        await settle(daemon.pid)
        for proof in (False, True) if 1 in parts else ():
            if not proof:
                print("1. small /query")
            for clients in (1, 16):
                latencies, cpu = await small_queries(
                    url, clients, proof, args.per_client, daemon.pid
                )
                label = f"{clients:2d} client(s){' + proof' if proof else '        '}"
                figures = percentiles(latencies, SMALL_P50_TARGET_MS, SMALL_P99_TARGET_MS)
                print(f"   {label}: {figures}")
                print(f"      {floor_note(cpu, clients)}")

        if 2 in parts:
            latencies, stopped = await head_under_load(url, args.seconds)
            print("2. GET refs/head while 4 clients run heavy queries")
            figures = percentiles(latencies, None, HEAD_P99_TARGET_MS)
            print(f"   {figures}; {stopped} heavy queries stopped at the time limit")
        if 3 not in parts:
            return

        exports: dict[str, list[tuple[float, int, float]]] = {label: [] for label in EXPORTS}
        engine = []
        for _ in range(args.repeat):  # interleaved: all see the machine's load alike
            for label, options in EXPORTS.items():
                exports[label].append(
                    await large_export(
                        url, args.rows, daemon.pid, options, work / "export-api.json"
                    )
                )
            engine.append(await engine_export(root, work))
        aos = exports["JsonAoS"]
        api, size = best([run[0] for run in aos]), aos[0][1]
        api_cpu = best([run[2] for run in aos])
        execute = best([run[0] for run in engine])
        written = best([run[1] for run in engine])
        text = best([run[2] for run in engine])
        written_cpu = best([run[3] for run in engine])
        print(f"3. {args.rows:,}-row SELECT * as JsonAoS (best of {args.repeat})")
        print(f"   /query, body written to a file:  {api:6.2f} s ({size / 1e6:.0f} MB)")
        print(f"   DataFusion executing it:         {execute:6.2f} s")
        print(f"   DataFusion executing + writing JSON: {written:6.2f} s")
        print(f"   pyarrow writing it as CSV:       {text:6.2f} s")
        print(
            f"   CPU: the daemon answering {api_cpu:.2f} s, DataFusion executing + writing JSON "
            f"{written_cpu:.2f} s (on a shared machine the wall ratios move with other load; "
            "CPU time does not)"
        )
        for label, ratio in (
            ("CPU,  DataFusion execute + JSON", api_cpu / written_cpu),
            ("wall, DataFusion execute + JSON", api / written),
            ("wall, execute + pyarrow text   ", api / (execute + text)),
        ):
            print(
                f"   ratio /query : {label} = {ratio:.2f}x "
                f"(target <= {EXPORT_RATIO_TARGET:g}x, {verdict(ratio, EXPORT_RATIO_TARGET)})"
            )
        print("   the same answer in the other layouts (daemon CPU; none should cost more):")
        for label, runs in exports.items():
            layout_cpu = best([run[2] for run in runs])
            wall = best([run[0] for run in runs])
            print(
                f"   {label:<27} {layout_cpu:5.2f} s CPU ({layout_cpu / api_cpu:4.2f}x JsonAoS's), "
                f"{wall:5.2f} s wall, {runs[0][1] / 1e6:.0f} MB"
            )
    finally:
        if daemon is not None:
            await asyncio.to_thread(daemon.stop)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
