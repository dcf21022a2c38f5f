"""What the authorization decision adds to ``GET {dataset}/refs/head``, measured in one run.

Usage: python scripts/bench_auth.py [--datasets 10000] [--accounts 1000] [--relations 10000]
[--requests 3000]

Builds a node of ``--datasets`` datasets (catalog rows under ``account/name`` aliases; the one
requested is a real dataset), ``--accounts`` accounts and ``--relations`` relations (roles of
accounts on datasets, in ``Relations`` resources of 1,000 each), then serves it twice on loopback
from this process: once as ``odfd serve`` does (every request authorized: the bearer token looked
up, the cached policy's stamp checked, the decision made) and once with authorization off (the
middleware removed). The client sends the same request with an account's token to both servers,
alternating in rounds, and prints p50/p99 of each and the p99 added. Target: at most 1 ms added.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odfd.app.accounts import token_hash
from odfd.app.resource_types import RELATIONS
from odfd.app.resources import account_handle, apply_manifests, parse_manifest
from odfd.config import ServerConfig
from odfd.server.app import create_app
from protocol.identity import AccountName, DatasetId
from protocol.model import DatasetKind
from storage.catalog.accounts import AccountRecord, AccountTable, TokenRecord
from storage.workspace import Workspace

TARGET_ADDED_MS = 1.0
TOKEN = "odfd_bench-token-of-account-0002"
TARGET = "acct0001/bench-target"


async def build(root: Path, datasets: int, accounts: int, relations: int) -> None:
    async with await Workspace.init(root) as workspace:
        table = AccountTable(workspace.catalog)
        now = datetime.now(UTC)
        for i in range(accounts):
            name = f"acct{i:04d}"
            await table.add(
                AccountRecord(
                    name, account_handle(AccountName(name)).id, name, None, None, None, False, now
                )
            )
        await table.add_token(
            TokenRecord("bench", "acct0002", "bench", now, None, None), token_hash(TOKEN)
        )
        await workspace.create_dataset(TARGET, DatasetKind.ROOT)
        async with workspace.catalog.transaction() as raw:
            for i in range(datasets - 1):
                _, dataset_id = DatasetId.new_generated()
                await raw.execute(
                    "INSERT INTO datasets (id, alias, kind, head, head_sequence, created_at, "
                    "updated_at) VALUES (?, ?, 'root', NULL, NULL, '', '')",
                    (str(dataset_id), f"acct{i % accounts:04d}/ds{i:05d}"),
                )
        manifests = []
        per = 1000
        for start in range(0, relations, per):
            items = [
                {
                    "subject": f"Account:acct{(i * 7) % accounts:04d}",
                    "relation": "role",
                    "value": ("reader", "editor", "maintainer")[i % 3],
                    "object": f"Dataset:acct{i % accounts:04d}/ds{i % datasets:05d}",
                }
                for i in range(start, min(start + per, relations))
            ]
            document = {
                "$schema": RELATIONS.schema,
                "headers": {"name": f"bench-{start // per:03d}"},
                "spec": {"relations": items},
            }
            manifests.append(parse_manifest(document, f"bench-{start}"))
        await apply_manifests(workspace, manifests)


async def serve(workspace: Workspace, authorized: bool) -> tuple[web.AppRunner, str]:
    app = create_app(workspace, ServerConfig(address="127.0.0.1", port=0))
    if not authorized:
        app.middlewares.clear()
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/"


async def measure(root: Path, requests: int) -> dict[str, list[float]]:
    async with await Workspace.open(root) as workspace:
        servers = {name: await serve(workspace, name == "on") for name in ("on", "off")}
        times: dict[str, list[float]] = {"on": [], "off": []}
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with aiohttp.ClientSession() as http:
                for name, (_, url) in servers.items():  # warm up: caches, connections
                    for _ in range(50):
                        async with http.get(f"{url}{TARGET}/refs/head", headers=headers) as r:
                            assert r.status == 200, (name, r.status, await r.text())
                            await r.read()
                for _ in range(requests // 100):
                    for name, (_, url) in servers.items():
                        for _ in range(100):
                            start = time.perf_counter()
                            async with http.get(f"{url}{TARGET}/refs/head", headers=headers) as r:
                                await r.read()
                            times[name].append((time.perf_counter() - start) * 1000)
        finally:
            for runner, _ in servers.values():
                await runner.cleanup()
    return times


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--accounts", type=int, default=1_000)
    parser.add_argument("--relations", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=3_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as tmp:
        root = Path(tmp) / "ws"
        started = time.perf_counter()
        asyncio.run(build(root, args.datasets, args.accounts, args.relations))
        print(
            f"node: {args.datasets} datasets, {args.accounts} accounts, {args.relations} "
            f"relations (built in {time.perf_counter() - started:.1f} s)"
        )
        times = asyncio.run(measure(root, args.requests))
    for name in ("off", "on"):
        print(
            f"authorization {name:3}: p50 {statistics.median(times[name]):.3f} ms  "
            f"p99 {p99(times[name]):.3f} ms  ({len(times[name])} requests)"
        )
    added = p99(times["on"]) - p99(times["off"])
    ratio = p99(times["on"]) / p99(times["off"])
    print(
        f"p99 added: {added:.3f} ms (ratio {ratio:.2f}); target <= {TARGET_ADDED_MS} ms: "
        + ("met" if added <= TARGET_ADDED_MS else "NOT met")
    )
    return 0 if added <= TARGET_ADDED_MS else 1


if __name__ == "__main__":
    sys.exit(main())
