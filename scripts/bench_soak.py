"""Soak: a mirroring daemon over a long run with a share of its peers failing, measured in one run.

Usage: python scripts/bench_soak.py [--duration 10m] [--mirrors 200] [--failing 0.1]
       [--fail-rate 0.2] [--settle 5m] [--every 10s] [--append-every 2s] [--sample-every 15s] [--dir DIR]

Node A (an ``odfd daemon`` process) serves ``--mirrors`` small root datasets and keeps growing
them (one new slice in a random dataset every ``--append-every``). Node B (another daemon) mirrors
all of them every ``--every``; a ``--failing`` share of the mirrors reach A through a failing peer
(``tests/daemon/flaky_peer.py``: 503s, cut connections, truncated and corrupted bodies on
``--fail-rate`` of its requests). Printed:

- B's resident memory (``VmRSS``) every ``--sample-every``, and its growth from the end of the
  first quarter of the run to the end (flat: growth well under the first-quarter figure);
- sync attempts by outcome;
- after the run, within ``--settle``: how many mirrors reached their source's head (a failing
  peer may keep a few behind), and every dataset of B checked independently (chain rules, every
  block re-hashed, every data file's physical and logical hash; its head in A's history): lost
  and corrupted datasets.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odfd.config import parse_duration
from storage.workspace import Workspace
from tests.daemon.flaky_peer import FlakyPeerProcess
from tests.daemon.processes import (
    FAST_SYNC_CONFIG,
    DaemonProcess,
    mirror_manifests,
    odfd,
)
from tests.fixtures.proc_memory import memory_kib
from tests.replication.datagen import DatasetWriter, create_root, verify_integrity

QUIET = '\n[audit]\nafter_sync = false\ninterval = "0s"\n'


def _outcomes(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        rows = db.execute("SELECT outcome, count(*) FROM sync_attempts GROUP BY outcome").fetchall()
    return {outcome: count for outcome, count in rows}


def _heads(root: Path) -> dict[str, str]:
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        return {alias: head for alias, head in db.execute("SELECT alias, head FROM datasets")}


async def _history(workspace: Workspace) -> dict[str, set[str]]:
    """alias -> every block hash of A's dataset (any of them is a valid head for a mirror)."""
    return {
        record.alias: {
            hash.to_multibase()
            async for hash, _ in workspace.open_dataset(record.id).chain.iter_blocks()
        }
        for record in await workspace.list_datasets()
    }


async def _check_all(root: Path, history: dict[str, set[str]]) -> tuple[int, list[str], list[str]]:
    """(datasets checked, those failing the independent integrity check, those whose head is
    not in the source's history)."""
    bad, stray = [], []
    async with await Workspace.open(root) as workspace:
        records = await workspace.list_datasets()
        for record in records:
            try:
                await verify_integrity(workspace.open_dataset(record.id))
            except Exception as err:  # noqa: BLE001 - every failure is a corrupted dataset
                bad.append(f"{record.alias}: {err}")
            if record.head is None or record.head.to_multibase() not in history[record.alias]:
                stray.append(record.alias)
    return len(records), bad, stray


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=parse_duration, default=600.0)
    parser.add_argument("--mirrors", type=int, default=200)
    parser.add_argument("--failing", type=float, default=0.1, help="share of failing peers")
    parser.add_argument(
        "--fail-rate", type=float, default=0.2, help="share of a failing peer's requests"
    )
    parser.add_argument("--every", default="10s")
    parser.add_argument("--append-every", type=parse_duration, default=2.0)
    parser.add_argument("--sample-every", type=parse_duration, default=15.0)
    parser.add_argument(
        "--settle", type=parse_duration, default=300.0, help="how long to wait for convergence"
    )
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="odfd-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    asyncio.run(_run(args, folder))


async def _run(args: argparse.Namespace, folder: Path) -> None:
    rng = random.Random(7)
    aliases = [f"soak.{n:03d}" for n in range(args.mirrors)]
    failing = set(aliases[: round(args.mirrors * args.failing)])
    a_root, b_root = folder / "a", folder / "b"
    workspace = await Workspace.init(a_root)
    writers: dict[str, DatasetWriter] = {}
    for n, alias in enumerate(aliases):
        writers[alias] = await create_root(workspace, alias, slices=1, rows=5, seed=n)
    (a_root / "config.toml").write_text((a_root / "config.toml").read_text() + QUIET)
    a = DaemonProcess(a_root, folder / "a.log").start()
    peer = FlakyPeerProcess(a.server_url or "", folder, args.fail_rate)
    b = DaemonProcess(b_root, folder / "b.log")
    try:
        peer_url = peer.start()
        await (await Workspace.init(b_root)).close()
        config = FAST_SYNC_CONFIG.replace("[sync]\n", "[sync]\nmax_concurrent = 8\n") + QUIET
        (b_root / "config.toml").write_text((b_root / "config.toml").read_text() + config)
        sources = {
            alias: f"{peer_url if alias in failing else a.server_url}{alias}" for alias in aliases
        }
        odfd("apply", "-f", str(mirror_manifests(folder, sources, every=args.every)), root=b_root)
        b.start()
        started = time.monotonic()
        print(
            f"soak: {args.mirrors} mirrors every {args.every}, {len(failing)} through a failing "
            f"peer ({args.fail_rate:.0%} of its requests fail), {args.duration:g} s; in {folder}"
        )
        print(f"{'t (s)':>7} {'RSS (MiB)':>10} {'updated':>8} {'unchanged':>10} {'failed':>7}")
        samples: list[tuple[float, int]] = []
        next_sample = next_append = started
        appended = 0
        while (now := time.monotonic()) - started < args.duration:
            if now >= next_append:
                await writers[rng.choice(aliases)].append(slices=1, rows=5)
                appended += 1
                next_append += args.append_every
            if now >= next_sample:
                rss = memory_kib(b.pid)
                samples.append((now - started, rss))
                counts = _outcomes(b_root)
                print(
                    f"{now - started:7.0f} {rss / 1024:10.1f} {counts.get('updated', 0):8} "
                    f"{counts.get('unchanged', 0):10} {counts.get('failed', 0):7}",
                    flush=True,
                )
                next_sample += args.sample_every
            await asyncio.sleep(0.2)
        expected = {alias: _heads(a_root)[alias] for alias in aliases}
        settle_started = time.monotonic()

        def behind() -> set[str]:
            heads = _heads(b_root)
            return {alias for alias, head in expected.items() if heads.get(alias) != head}

        for _ in range(int(args.settle)):
            if not behind():
                break
            await asyncio.sleep(1.0)
        settled = time.monotonic() - settle_started
        lagging = behind()
        counts = _outcomes(b_root)
        b.stop()
        history = await _history(workspace)
    finally:
        b.stop()
        peer.stop()
        a.stop()
        await workspace.close()
    checked, bad, stray = await _check_all(b_root, history)
    quarter = next(rss for t, rss in samples if t >= args.duration / 4)
    final = samples[-1][1]
    never = len(set(aliases) - set(_heads(b_root)))
    print()
    print(f"appended slices on A: {appended}; sync attempts: {counts}")
    print(
        f"after the soak: {len(aliases) - len(lagging)} of {len(aliases)} mirrors at their "
        f"source's head within {settled:.0f} s ({len(lagging & failing)} behind a failing peer, "
        f"{len(lagging - failing)} behind a healthy one)"
    )
    print(
        f"B RSS: first sample {samples[0][1] / 1024:.1f} MiB, end of first quarter "
        f"{quarter / 1024:.1f} MiB, end {final / 1024:.1f} MiB: growth {final / quarter:.3f}x "
        f"over the last three quarters"
    )
    print(
        f"datasets checked: {checked}; off the source's history (lost): {len(stray)}; "
        f"corrupted: {len(bad)}; never synced yet (behind the failing peer): {never}"
    )
    for line in bad:
        print(f"  corrupted: {line}")
    for line in stray:
        print(f"  not at a head of the source: {line}")


if __name__ == "__main__":
    main()
