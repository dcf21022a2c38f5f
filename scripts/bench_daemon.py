"""The daemon under 1,000 configured mirrors, measured in one run.

Usage: python scripts/bench_daemon.py [--mirrors 1000] [--concurrency 8] [--idle-window 30] [--dir DIR]

Node A (an ``odfd daemon`` process) serves ``--mirrors`` small root datasets; node B (another
``odfd daemon`` process) is given one ``Mirror`` resource per dataset (``every: 1h``) with
``odfd apply`` and syncs them all. Reported:

- syncs per minute while B works through the initial sync of every mirror;
- B's peak RSS (``VmHWM``; no Spark JVM is started: mirrors of root datasets need none);
- B's idle CPU once everything is synced and nothing is due: CPU time from ``/proc/<pid>/stat``
  over ``--idle-window`` seconds, as a share of one core.

Targets: idle CPU < 2% of a core, RSS < 1 GB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.workspace import Workspace
from tests.daemon.processes import DaemonProcess, init_workspace, mirror_manifests, odfd, wait_for
from tests.replication.datagen import create_root

IDLE_CPU_TARGET = 0.02
RSS_TARGET_KIB = 1 << 20


async def _make_source(root: Path, count: int) -> list[str]:
    async with await Workspace.init(root) as workspace:
        aliases = []
        for n in range(count):
            await create_root(workspace, f"bench.{n:04d}", slices=1, rows=5, seed=n)
            aliases.append(f"bench.{n:04d}")
        return aliases


def _synced(root: Path) -> int:
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        return db.execute(
            "SELECT count(DISTINCT mirror) FROM sync_attempts WHERE outcome = 'updated'"
        ).fetchone()[0]


def _failed(root: Path) -> int:
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        return db.execute("SELECT count(*) FROM sync_attempts WHERE outcome = 'failed'").fetchone()[
            0
        ]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mirrors", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--idle-window", type=float, default=30.0)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="odfd-bench-daemon-"))
    print(f"creating {args.mirrors} source datasets in {work / 'a'} ...", flush=True)
    aliases = asyncio.run(_make_source(work / "a", args.mirrors))
    a = DaemonProcess(work / "a", work / "a.log").start()
    b = DaemonProcess(work / "b", work / "b.log")
    try:
        init_workspace(
            work / "b",
            f'\n[sync]\nmax_concurrent = {args.concurrency}\nstartup_spread = "0s"\n'
            '[audit]\nafter_sync = false\ninterval = "0s"\n',
        )
        odfd(
            "apply",
            "-f",
            str(mirror_manifests(work, {alias: f"{a.server_url}{alias}" for alias in aliases})),
            root=work / "b",
            timeout=1800,
        )
        b.start()
        started = time.monotonic()
        wait_for(
            f"{args.mirrors} mirrors to sync",
            lambda: _synced(work / "b") >= args.mirrors,
            3600,
            1.0,
        )
        elapsed = time.monotonic() - started
        time.sleep(2.0)  # let the last attempts' bookkeeping settle before measuring idle
        cpu_before, window_start = _cpu_seconds(b.pid), time.monotonic()
        time.sleep(args.idle_window)
        idle_cpu = (_cpu_seconds(b.pid) - cpu_before) / (time.monotonic() - window_start)
        peak_rss = _peak_rss_kib(b.pid)
        failed = _failed(work / "b")
        syncs_per_minute = args.mirrors / elapsed * 60
        print(
            f"mirrors:               {args.mirrors} (max {args.concurrency} syncs at once), {failed} failed attempts"
        )
        print(f"initial sync:          {elapsed:.1f} s = {syncs_per_minute:.0f} syncs/minute")
        print(
            f"peak RSS (daemon B):   {peak_rss / 1024:.0f} MiB = {peak_rss / RSS_TARGET_KIB:.2f}x the 1 GB target"
        )
        print(
            f"idle CPU ({args.idle_window:g} s window): {idle_cpu * 100:.2f}% of a core = "
            f"{idle_cpu / IDLE_CPU_TARGET:.2f}x the 2% target"
        )
        b.stop()
    finally:
        b.stop()
        a.stop()


if __name__ == "__main__":
    main()
