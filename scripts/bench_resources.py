#!/usr/bin/env python3
"""Benchmark of applying RFC-018 resources, measured in one run (issue 37's target: applying
1,000 resources takes < 10 s).

1,000 manifests (a quarter each SecretSet — encrypted on apply —, VariableSet, WebhookTarget and
Flow, the flows referencing the targets) are applied:

1. by ``odfd apply -f DIR`` in a process of its own (start-up, validation against the spec's
   JSON Schemas, encryption, storing, reference resolution and one reconcile pass included),
   then once more unchanged (nothing written);
2. over the HTTP resource protocol of a server in this process: one batch ``POST``, then one
   ``POST`` per resource from 16 concurrent clients.

Each line prints the time, resources per second and the ratio of the target to it (> 1: the
target is met).

3. Webhook-triggered mirror lag: two daemons in this process, a ``Mirror`` with
   ``subscribe: true`` (polling every hour); the source's head is moved ``--moves`` times and the
   time from each move to the mirror's head equal to it is measured: p50 and p90 against the
   target (p50 < 1 s) and against polling at ``[sync] default_interval`` (on average half of it).

4. A ``RestEndpoint`` Source's sustained ingest rate: the spec's ``source-push-http`` example on
   a daemon in this process (its buffer made large enough for the run, its flow's ``Source``
   trigger firing every ``--flush-records`` records or after one second), 16 concurrent clients
   posting NDJSON bodies of 1,000 records for ``--seconds``; records accepted into the buffer per
   second against the target (>= 20,000 records/s), then the time until the flow has committed
   every accepted record to the dataset (the engine's start-up included).

Usage: ``.venv/bin/python scripts/bench_resources.py [--count 1000] [--moves 20] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import pyarrow.parquet as pq

from odfd.app.node import Node
from odfd.app.resource_service import reconcile_here
from odfd.app.resources import apply_manifests, load_manifests
from odfd.config import NodeConfig, ServerConfig, SyncConfig
from odfd.server.app import running
from odfd.server.resource_api import ResourceApi
from storage.workspace import Workspace
from tests.fixtures.daemons import QUIET_DAEMON, start_daemon
from tests.replication.datagen import create_root

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 10.0
"""Applying 1,000 resources (scaled with --count)."""
TOKEN = "bench-admin"
CLIENTS = 16
KINDS = ("SecretSet", "VariableSet", "WebhookTarget", "Flow")
PATHS = {
    "SecretSet": "/config/v1alpha1/secretset",
    "VariableSet": "/config/v1alpha1/variableset",
    "WebhookTarget": "/sink/v1alpha1/webhooktarget",
    "Flow": "/flow/v1alpha1/flow",
}


def manifest(kind: str, n: int, prefix: str) -> dict[str, Any]:
    name = f"{prefix}{kind.lower()}-{n:05d}"
    headers = {"name": name, "labels": {"bench": "yes", "shard": str(n % 8)}}
    spec: dict[str, Any]
    if kind == "SecretSet":
        spec = {"secrets": {"token": f"secret-{n}", "password": f"pw-{n}"}}
    elif kind == "VariableSet":
        spec = {"variables": {"host": f"db-{n}.internal", "port": str(5000 + n)}}
    elif kind == "WebhookTarget":
        spec = {"url": f"http://127.0.0.1:9/hook/{n}", "secret": f"whsec-{n}"}
    else:
        spec = {
            "target": f"Dataset:bench.{n}.%",
            "triggers": [{"kind": "Schedule", "cron": f"{n % 60} * * * *"}],
            "tasks": [
                {
                    "kind": "WebhookCall",
                    "target": f"{prefix}webhooktarget-{n:05d}",
                    "payload": '{"flow": "${{ flow.name }}", "run": "${{ run.id }}"}',
                }
            ],
        }
    return {"$schema": kind, "headers": headers, "spec": spec}


def manifests(count: int, prefix: str = "") -> list[dict[str, Any]]:
    per_kind = count // len(KINDS)
    return [manifest(kind, n, prefix) for kind in KINDS for n in range(per_kind)]


def line(label: str, seconds: float, count: int) -> None:
    target = TARGET_SECONDS * count / 1000
    print(
        f"{label:<52} {seconds:7.2f} s  {count / seconds:8.0f} resources/s  "
        f"target {target:.1f} s: x{target / seconds:.1f}"
    )


def apply_by_cli(root: Path, folder: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "odfd", "apply", "-f", str(folder), "--root", str(root)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


async def apply_by_http(root: Path, count: int) -> tuple[float, float]:
    config = ServerConfig(port=0, admin_tokens=frozenset({TOKEN}))
    async with await Workspace.open(root) as workspace:
        node = Node(workspace, NodeConfig(server=config))
        api = ResourceApi(lambda: node, reconcile_here(node))
        async with running(workspace, config, mounts=[api]) as server:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with aiohttp.ClientSession(server.url.rstrip("/"), headers=headers) as client:
                batch = manifests(count, "http-batch-")
                started = time.perf_counter()
                for kind in KINDS:
                    documents = [m for m in batch if m["$schema"] == kind]
                    async with client.post(PATHS[kind], json=documents) as response:
                        assert response.status == 200, await response.text()
                batch_seconds = time.perf_counter() - started

                singles = manifests(count, "http-one-")
                queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
                for document in singles:
                    queue.put_nowait(document)

                async def poster() -> None:
                    while not queue.empty():
                        document = queue.get_nowait()
                        path = PATHS[document["$schema"]]
                        async with client.post(path, data=json.dumps(document)) as response:
                            assert response.status == 201, await response.text()

                started = time.perf_counter()
                await asyncio.gather(*(poster() for _ in range(CLIENTS)))
                single_seconds = time.perf_counter() - started
    return batch_seconds, single_seconds


LAG_TARGET_SECONDS = 1.0
INGEST_TARGET = 20_000
"""Records per second into a ``RestEndpoint`` Source's buffer, 16 concurrent posters."""
PUSH_EXAMPLE = REPO / "tests" / "fixtures" / "spec_examples" / "source-push-http"


async def _until(check: Callable[[], Awaitable[bool]], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the mirror did not follow")
        await asyncio.sleep(0.005)


async def mirror_lag(tmp: Path, moves: int) -> list[float]:
    async with (
        await Workspace.init(tmp / "lag-source") as source_ws,
        await Workspace.init(tmp / "lag-mirror") as mirror_ws,
    ):
        writer = await create_root(source_ws, "cities", slices=1)
        source = await start_daemon(
            source_ws, f'[server]\nadmin_tokens = ["{TOKEN}"]\n' + QUIET_DAEMON
        )
        mirror = await start_daemon(
            mirror_ws, QUIET_DAEMON + f'[sync.tokens]\n"{source.server_url}" = "{TOKEN}"\n'
        )
        lags = []
        try:
            manifest = f"""$schema: Mirror
headers: {{name: cities}}
spec: {{source: "{source.server_url}cities/", every: 1h, subscribe: true}}
"""
            path = tmp / "mirror.yaml"
            path.write_text(manifest)
            await apply_manifests(mirror_ws, load_manifests([path]))
            await mirror.reconcile_resources()

            async def mirrored(head: Any) -> bool:
                record = await mirror_ws.catalog.find_by_alias("cities")
                return record is not None and record.head == head

            first = await writer.dataset.chain.head()
            await _until(lambda: mirrored(first), 60)
            record = await source_ws.catalog.find_by_alias("cities")
            assert record is not None
            for _ in range(moves):
                head = await writer.append(slices=1)
                started = time.perf_counter()
                await source._ingested(record.id)
                await _until(functools.partial(mirrored, head))
                lags.append(time.perf_counter() - started)
        finally:
            await mirror.shutdown()
            # Each daemon makes its executor the loop's; two share this loop.
            asyncio.get_running_loop().set_default_executor(source._executor)
            await source.shutdown()
        return lags


def _push_manifests(folder: Path, capacity: int, flush_records: int) -> None:
    """The spec's push example, its buffer and trigger sized for a sustained run."""
    folder.mkdir()
    for name in ("dataset-raw.yaml", "source.yaml", "flow.yaml"):
        text = (PUSH_EXAMPLE / name).read_text().replace("UInt64", "Int64")
        text = text.replace("bufferSize: 1000", f"bufferSize: {capacity}")
        text = text.replace("minRecordsToAwait: 100", f"minRecordsToAwait: {flush_records}")
        (folder / name).write_text(text.replace("maxAwaitInterval: 1h", "maxAwaitInterval: 1s"))


def _ndjson(records: int) -> bytes:
    return b"\n".join(
        json.dumps(
            {
                "ts": f"2026-03-02T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "temp": 20.5 + i % 7,
            }
        ).encode()
        for i in range(records)
    )


def _records_in(data_dir: Path) -> int:
    """Records in a dataset's committed data files (files being written start with a dot)."""
    files = [f for f in data_dir.glob("*") if f.is_file() and not f.name.startswith(".")]
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


async def rest_endpoint_rate(
    tmp: Path, seconds: float, flush_records: int
) -> tuple[float, int, float]:
    """(records/s accepted, records accepted, seconds from the last post until all committed)."""
    async with await Workspace.init(tmp / "push") as workspace:
        folder = tmp / "push-manifests"
        _push_manifests(folder, capacity=5_000_000, flush_records=flush_records)
        daemon = await start_daemon(
            workspace, f'[server]\npush_tokens = ["{TOKEN}"]\n' + QUIET_DAEMON
        )
        try:
            await apply_manifests(workspace, load_manifests([folder]))
            await daemon.reconcile_resources()
            url = f"{daemon.server_url}source/sensor.temp.http/ingest"
            body = _ndjson(1000)
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-ndjson"}
            accepted = 0
            async with aiohttp.ClientSession() as http:

                async def poster(until: float) -> None:
                    nonlocal accepted
                    while time.perf_counter() < until:
                        async with http.post(url, data=body, headers=headers) as response:
                            answer = await response.json()
                            if response.status != 202:
                                raise RuntimeError(f"post refused: {response.status} {answer}")
                            accepted += answer["accepted"]

                started = time.perf_counter()
                await asyncio.gather(*(poster(started + seconds) for _ in range(CLIENTS)))
                elapsed = time.perf_counter() - started
            posted = time.perf_counter()
            found = await workspace.catalog.find_by_alias("sensor.temp")
            assert found is not None
            layout = workspace.open_dataset(found.id).layout
            assert layout is not None
            data = layout.data_dir
            deadline = posted + 600
            while await asyncio.to_thread(_records_in, data) < accepted:
                if time.perf_counter() > deadline:
                    raise TimeoutError("the flow did not commit every accepted record")
                await asyncio.sleep(0.2)
            return accepted / elapsed, accepted, time.perf_counter() - posted
        finally:
            await daemon.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--flush-records", type=int, default=100_000)
    args = parser.parse_args()
    count = args.count - args.count % len(KINDS)
    with tempfile.TemporaryDirectory(prefix="bench-resources-") as tmp:
        root = Path(tmp) / "ws"

        async def init() -> None:
            async with await Workspace.init(root):
                pass

        asyncio.run(init())
        folder = Path(tmp) / "manifests"
        folder.mkdir()
        for n, document in enumerate(manifests(count)):
            (folder / f"{n:05d}.json").write_text(json.dumps(document))
        print(f"{count} resources: {', '.join(f'{count // len(KINDS)} {k}' for k in KINDS)}")
        line("odfd apply -f (new process, created)", apply_by_cli(root, folder), count)
        line("odfd apply -f (new process, unchanged)", apply_by_cli(root, folder), count)
        batch, single = asyncio.run(apply_by_http(root, count))
        line("HTTP POST, one batch per type", batch, count)
        line(f"HTTP POST, one resource each, {CLIENTS} clients", single, count)
        lags = sorted(asyncio.run(mirror_lag(Path(tmp), args.moves)))
        p50, p90 = lags[len(lags) // 2], lags[int(len(lags) * 0.9)]
        polling = SyncConfig().default_interval / 2
        print(
            f"{'mirror lag by webhook (' + str(len(lags)) + ' head moves)':<52} "
            f"p50 {p50 * 1000:6.0f} ms  p90 {p90 * 1000:6.0f} ms  "
            f"target p50 {LAG_TARGET_SECONDS:.0f} s: x{LAG_TARGET_SECONDS / p50:.1f}  "
            f"polling every {SyncConfig().default_interval:.0f} s (mean lag {polling:.0f} s): "
            f"x{polling / p50:.0f}"
        )
        rate, accepted, flushed = asyncio.run(
            rest_endpoint_rate(Path(tmp), args.seconds, args.flush_records)
        )
        print(
            f"{'RestEndpoint ingest, ' + str(CLIENTS) + ' posters':<52} "
            f"{rate:9.0f} records/s ({accepted} in {args.seconds:.0f} s)  "
            f"target {INGEST_TARGET}: x{rate / INGEST_TARGET:.1f}  "
            f"all committed by the flow {flushed:.1f} s after the last post"
        )


if __name__ == "__main__":
    main()
