#!/usr/bin/env python3
"""Benchmark of the Flight SQL server (``odfd sql server`` as a process), measured in one run.

1. Large result: ``SELECT *`` of a 10,000,000-row dataset fetched through ADBC into an Arrow
   table, as a ratio to DataFusion reading the same data in-process (the engine odfd runs, the
   same files, no network). Target: <= 1.3x.
2. Small query round trip (plan + fetch, a fresh statement each time: the ADBC driver makes four
   calls of it, CreatePreparedStatement, GetFlightInfo, DoGet, ClosePreparedStatement) with 1
   and 16 concurrent clients, each on its own ADBC connection, anonymous and with an issued
   account token (whose subject the server checks on every call): p50 and p99. Target: p50 <=
   10 ms. Beside each: the CPU one query costs the server and the client (both measured over
   the run: the server's from /proc, all its threads; the clients' as this process's), and the
   p50 those costs allow at best on this machine's cores: with N clients always waiting, a
   query waits for the N queries ahead of it, so p50 >= N x (server + client CPU) / min(N,
   cores); one client cannot go below server + client CPU.
3. The server's peak memory while it streams the large result: its resident set sampled every
   10 ms during the fetch, above what it held before. Target: bounded, far under the result.
   (The resident set before each fetch is printed as well: it grows over the first fetches
   and then swings, by ~350 MiB for 10M rows, with or without Flight. Measured: Arrow's pool
   holds 0 bytes after a fetch and glibc's malloc_trim releases nothing; DataFusion streaming
   the same scan in a plain process, no Flight and no conversion to pyarrow, swings between
   ~400 and ~760 MiB over six runs: memory the engine's own Rust allocator keeps for reuse,
   bounded, not held by the server.)

The dataset is written once as slices (no ingest); ``--workspace DIR`` keeps it for the next
run. Each large timing is the best of ``--repeat``. Usage:
``.venv/bin/python scripts/bench_flight_sql.py [--rows 10000000] [--workspace DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
from _proc_cpu import process_cpu
from bench_engines import root_with, trades_table

from odfd.app.accounts import AccountError, add_account, create_token, require_account
from odfd.app.node import open_node
from odfd.app.query import query_table
from odfd.coordinator.query import dataset_view
from storage.workspace import Workspace
from tests.fixtures.proc_memory import memory_kib
from verifier.engine.datafusion.session import QuerySession

LARGE = "big.trades"
SMALL = "few.trades"
SMALL_QUERY = f'SELECT symbol, price FROM "{SMALL}" WHERE seq = 7'


BENCH_ACCOUNT = "bench"


async def setup(root: Path, rows: int) -> None:
    async with await Workspace.init(root) as workspace:
        await root_with(workspace, LARGE, trades_table(rows, 1000))
        await root_with(workspace, SMALL, trades_table(300, 20))


async def issue_token(root: Path) -> str:
    """A new token of the bench's account (created on first use), as ``odfd account token
    create`` issues them."""
    async with await open_node(root) as node:
        try:
            await require_account(node, BENCH_ACCOUNT)
        except AccountError:
            await add_account(node, BENCH_ACCOUNT, password=None)
        return (await create_token(node, BENCH_ACCOUNT, label="bench")).secret


async def in_process(root: Path) -> tuple[float, pa.Table]:
    """DataFusion reading the large dataset into an Arrow table in this process, in the kind of
    session the server keeps (the same settings and registration): seconds and the table."""
    async with await Workspace.open(root) as workspace:
        record = await workspace.try_resolve(LARGE)
        assert record is not None
        view = await dataset_view(workspace.open_dataset(record.id))
    session = QuerySession()
    session.register(query_table(view), str(view.head))
    started = time.perf_counter()
    table = session.plan(f'SELECT * FROM "{LARGE}"').frame.to_arrow_table()
    seconds = time.perf_counter() - started
    session.close()
    return seconds, table


def connect(url: str, token: str | None = None) -> flightsql.Connection:
    """An anonymous ADBC connection (as ``kamu.connect`` makes one), or one with ``token``."""
    options = adbc_driver_manager.DatabaseOptions
    credentials = (
        {options.USERNAME.value: "anonymous", options.PASSWORD.value: ""}
        if token is None
        else {adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {token}"}
    )
    return flightsql.connect(url, db_kwargs=credentials, autocommit=True)


def fetch(connection: flightsql.Connection, sql: str) -> pa.Table:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def peak_while(pid: int, work: Callable[[], pa.Table]) -> tuple[int, int, pa.Table]:
    """The server's resident set before ``work`` and its peak during it (KiB), and the result."""
    before = memory_kib(pid)
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, memory_kib(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = work()
    finally:
        done.set()
        sampler.join()
    return before, peak, result


@dataclass
class RoundTrips:
    """Round trips of small queries and the CPU each cost the server and the clients."""

    clients: int
    seconds: list[float]
    server_cpu: float
    client_cpu: float

    def line(self, who: str) -> str:
        cores = os.cpu_count() or 1
        floor = self.clients * (self.server_cpu + self.client_cpu) / min(self.clients, cores)
        return (
            f"small query round trip, {who}, {self.clients:>2} client(s), "
            f"{len(self.seconds)} queries: p50 {percentile(self.seconds, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(self.seconds, 0.99) * 1000:.1f} ms (target p50 <= 10 ms); "
            f"CPU per query: server {self.server_cpu * 1000:.2f} ms, client "
            f"{self.client_cpu * 1000:.2f} ms; best p50 these allow on {cores} cores: "
            f"{floor * 1000:.1f} ms"
        )


def latencies(
    url: str, server: int, clients: int, queries: int, token: str | None = None
) -> RoundTrips:
    """``queries`` small queries on each of ``clients`` connections: their round trips and the
    CPU the server and this process (the clients) spent per query meanwhile."""
    connections = [connect(url, token) for _ in range(clients)]
    ready = threading.Barrier(clients + 1)

    def client(connection: flightsql.Connection) -> list[float]:
        fetch(connection, SMALL_QUERY)  # the handshake and first plan are not timed
        ready.wait()
        times = []
        for _ in range(queries):
            started = time.perf_counter()
            fetch(connection, SMALL_QUERY)
            times.append(time.perf_counter() - started)
        return times

    try:
        with ThreadPoolExecutor(clients) as pool:
            running = [pool.submit(client, connection) for connection in connections]
            ready.wait()
            server_before, client_before = process_cpu(server, children=False), time.process_time()
            seconds = [t for future in running for t in future.result()]
            server_cpu = process_cpu(server, children=False) - server_before
            client_cpu = time.process_time() - client_before
    finally:
        for connection in connections:
            connection.close()
    count = clients * queries
    return RoundTrips(clients, seconds, server_cpu / count, client_cpu / count)


def server_url(server: subprocess.Popen[str]) -> str:
    """The URL ``odfd sql server`` prints once it listens (gRPC may log lines before it)."""
    assert server.stderr is not None
    seen = []
    for line in server.stderr:
        found = re.search(r"listening on (grpc://\S+?);", line)
        if found:
            return found.group(1)
        seen.append(line)
    raise SystemExit("the server did not start: " + "".join(seen))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200, help="small queries per client")
    parser.add_argument(
        "--workspace", type=Path, help="keep the workspace here (made once, then reused)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odfd-bench-flight-sql-") as folder:
        root = args.workspace or Path(folder) / "ws"
        started = time.perf_counter()
        if not root.exists():
            asyncio.run(setup(root, args.rows))
            print(f"setup: {args.rows:,} rows written in {time.perf_counter() - started:.1f} s")
        token = asyncio.run(issue_token(root))
        local = []
        for _ in range(args.repeat):
            seconds, table = asyncio.run(in_process(root))
            local.append(seconds)
        size_mib = table.nbytes / 2**20
        del table
        server = subprocess.Popen(
            [sys.executable, "-m", "odfd", "sql", "server", "--port", "0", "--root", str(root)],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = server_url(server)
            remote = []
            peaks = []
            befores: list[int] = []
            with connect(url) as connection:
                fetch(connection, f'SELECT * FROM "{LARGE}" LIMIT 1')  # the engine loaded
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    before, peak, table = peak_while(
                        server.pid, lambda: fetch(connection, f'SELECT * FROM "{LARGE}"')
                    )
                    remote.append(time.perf_counter() - started)
                    peaks.append(peak - before)
                    befores.append(before)
                    assert table.num_rows == args.rows
                    del table
            small = {
                (who, clients): latencies(
                    url, server.pid, clients, queries, None if who == "anonymous" else token
                )
                for who in ("anonymous", "with a token")
                for clients, queries in ((1, args.queries), (16, max(args.queries // 4, 10)))
            }
        finally:
            server.terminate()
            server.wait(60)
    ratio = min(remote) / min(local)
    print(
        f"large result ({args.rows:,} rows, {size_mib:,.0f} MiB as Arrow): ADBC fetch "
        f"{min(remote):.2f} s, DataFusion in-process {min(local):.2f} s: "
        f"ratio {ratio:.2f}x (target <= 1.3x)"
    )
    for (who, _), trips in small.items():
        print(trips.line(who))
    print(
        f"server peak memory while streaming: +{max(peaks) / 1024:,.0f} MiB above its resident "
        f"set before the fetch (worst of {len(peaks)}; the result is {size_mib:,.0f} MiB; "
        f"resident before each fetch: {', '.join(f'{b / 1024:,.0f}' for b in befores)} MiB)"
    )
    print("load average: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
