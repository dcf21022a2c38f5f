"""Load: one daemon mirrors 200 small datasets from another at once, on loopback, 10% of them
through a failing peer (503s, cut connections, truncated and corrupted bodies). Every mirror
ends at its source's head with no dataset lost or corrupted (each re-checked independently),
only the failing peer's mirrors record failures, no more than ``max_concurrent`` syncs run at a
time (derived from the attempts the catalog recorded), and the daemon's memory stays flat while
it works through them."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import datetime
from pathlib import Path

import pytest

from storage.workspace import Workspace
from tests.daemon.flaky_peer import FlakyPeerProcess
from tests.daemon.processes import (
    FAST_SYNC_CONFIG,
    DaemonProcess,
    init_workspace,
    mirror_manifests,
    odfd,
    wait_for,
)
from tests.replication.datagen import create_root, verify_integrity

pytestmark = pytest.mark.slow

DATASETS = 200
FAILING = DATASETS // 10
MAX_CONCURRENT = 4


async def _make_source(root: Path) -> dict[str, str]:
    async with await Workspace.init(root) as workspace:
        heads = {}
        for n in range(DATASETS):
            writer = await create_root(workspace, f"small.{n:03d}", slices=1, rows=5, seed=n)
            heads[f"small.{n:03d}"] = (await writer.dataset.chain.head()).to_multibase()
        return heads


def _attempts(root: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        return db.execute(
            "SELECT mirror, started_at, finished_at, outcome FROM sync_attempts"
        ).fetchall()


def _max_overlap(attempts: list[tuple[str, str, str, str]]) -> int:
    """Most attempts running at one instant (an end before a start at the same instant)."""
    events = []
    for _, started, finished, _ in attempts:
        events.append((datetime.fromisoformat(started), 1))
        events.append((datetime.fromisoformat(finished), -1))
    running = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        running += delta
        peak = max(peak, running)
    return peak


async def _check_all(root: Path) -> int:
    async with await Workspace.open(root) as workspace:
        records = await workspace.list_datasets()
        for record in records:
            await verify_integrity(workspace.open_dataset(record.id))
        return len(records)


def test_mirror_200_datasets_at_once_with_failing_peers(tmp_path: Path) -> None:
    heads = asyncio.run(_make_source(tmp_path / "a"))
    a = DaemonProcess(tmp_path / "a", tmp_path / "a.log").start()
    b = DaemonProcess(tmp_path / "b", tmp_path / "b.log")
    peer = FlakyPeerProcess(a.server_url or "", tmp_path, fail_rate=0.3, seed=3)
    failing = set(sorted(heads)[:FAILING])
    try:
        peer_url = peer.start()
        init_workspace(
            tmp_path / "b",
            FAST_SYNC_CONFIG.replace("[sync]\n", f"[sync]\nmax_concurrent = {MAX_CONCURRENT}\n"),
        )
        odfd(
            "apply",
            "-f",
            str(
                mirror_manifests(
                    tmp_path,
                    {
                        alias: f"{peer_url if alias in failing else a.server_url}{alias}"
                        for alias in heads
                    },
                )
            ),
            root=tmp_path / "b",
        )
        b.start()
        samples: list[tuple[int, int]] = []  # (datasets synced, RSS KiB)

        def done() -> bool:
            synced = sum(
                1 for _, _, _, outcome in _attempts(tmp_path / "b") if outcome == "updated"
            )
            samples.append((synced, b.rss_kib()))
            return synced >= DATASETS

        started = time.monotonic()
        wait_for("200 mirrors to sync", done, 300, 0.5)
        elapsed = time.monotonic() - started
        status = b.status()
        assert {d["alias"]: d["head"] for d in status["datasets"]} == heads
        attempts = _attempts(tmp_path / "b")
        failed = {a[0] for a in attempts if a[3] not in ("updated", "unchanged")}
        assert failed and failed <= failing, failed - failing
        peak = _max_overlap(attempts)
        assert 2 <= peak <= MAX_CONCURRENT, peak
        metrics = b.metrics()
        assert metrics['odfd_syncs_total{outcome="updated"}'] == DATASETS
        assert metrics['odfd_syncs_total{outcome="failed"}'] == len(attempts) - DATASETS
        # Flat memory: what the daemon holds after 200 syncs is about what it held after 50.
        quarter = next(rss for synced, rss in samples if synced >= DATASETS // 4)
        final = samples[-1][1]
        assert final <= quarter * 1.2 + 20_000, (quarter, final, samples)
        print(
            f"200 mirrors synced in {elapsed:.1f} s ({len(attempts) - DATASETS} failed attempts "
            f"through the failing peer); peak concurrency {peak}; RSS {quarter} -> {final} KiB"
        )
        assert b.stop() == 0
        assert asyncio.run(_check_all(tmp_path / "b")) == DATASETS  # none lost or corrupted
    finally:
        b.stop()
        peer.stop()
        a.stop()
