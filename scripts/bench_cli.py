#!/usr/bin/env python3
"""Benchmark of whole ``odfd`` processes on the leaderboard example, measured in one run.

Each figure is the median of ``--repeat`` runs of ``.venv/bin/odfd ...`` as a user types it,
printed beside today's way in the same run:

* commands that need no engine (``--help``, ``list``, ``log``, ``status``, ``tail``), beside a
  process that imports every command module as the CLI did before it imported lazily;
* Spark commands (``ingest`` of a small file, ``pull`` of the small Spark transform, ``verify
  --recursive`` of it, ``sql``) with a running daemon, as a user types them (the daemon runs them
  in its warm process), beside the same command in its own process as a client of the daemon's
  Spark Connect server (``ODFD_NO_DAEMON=1``: how commands ran before they went to the daemon)
  and on a workspace without a daemon (a JVM started by the command).

Before each Spark run the datasets are recreated (untimed), so every run does the same work.
Usage: ``.venv/bin/python scripts/bench_cli.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ODFD = REPO / ".venv" / "bin" / "odfd"
EXAMPLE = REPO / "examples" / "leaderboard"
SMALL_FILE = EXAMPLE / "data" / "1.ndjson"
QUERY = "SELECT player, max(score) AS best FROM `match.scores` GROUP BY player"
EAGER_IMPORTS = "from odfd.cli.main import build_parser; build_parser()"


def odfd(root: Path, *args: str, env: dict[str, str] | None = None) -> float:
    """Seconds one ``odfd ARGS`` process took (it must succeed)."""
    began = time.perf_counter()
    done = subprocess.run(
        [str(ODFD), *args],
        env={**os.environ, "ODFD_HOME": str(root), **(env or {})},
        capture_output=True,
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"odfd {' '.join(args)} failed:\n{done.stderr.decode()}")
    return seconds


def python(code: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True)
    return time.perf_counter() - began


def reset(root: Path) -> None:
    """The example's datasets, new and empty (every run does the same work)."""
    if any((root / "datasets").iterdir()):
        odfd(root, "delete", "--all", "--yes")
    odfd(root, "add", str(EXAMPLE))


def start_daemon(root: Path) -> subprocess.Popen[bytes]:
    log = open(root.parent / "daemon.log", "wb")
    daemon = subprocess.Popen(
        [str(ODFD), "daemon", "--port", "0"],
        env={**os.environ, "ODFD_HOME": str(root), "ODFD_DAEMON_SPARK_CONNECT": "true"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 600
    while not (root / "engine.json").exists() or not (root / "daemon.json").exists():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the daemon did not start; see {root.parent / 'daemon.log'}")
        time.sleep(0.5)
    return daemon


def byte_compile() -> None:
    """odfd as pip installs it, byte-compiled (as ``scripts/setup`` leaves it), so no run pays
    for compiling sources an earlier edit left stale."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "odfd", "protocol", "storage"]
        + ["verifier"],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def median(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    args = parser.parse_args()
    byte_compile()
    work = Path(tempfile.mkdtemp(prefix="odfd-bench-cli-"))
    warm, cold = work / "daemon" / "ws", work / "local" / "ws"
    for root in (warm, cold):
        root.parent.mkdir()
        odfd(root, "init")
        reset(root)
    # commands that need no engine, on a quiet machine: before the daemon (and its JVM) starts
    print(f"median of {args.repeat} whole-process runs each (seconds)")
    eager = median(args.repeat, lambda: python(EAGER_IMPORTS))
    print(f"{'command':<28} {'now':>7} {'before':>8} {'ratio':>6}")
    for argv in (["--help"], ["list"], ["log", "match.scores"], ["status"]):
        now = median(args.repeat, functools.partial(odfd, cold, *argv))
        print(
            f"{' '.join(argv):<28} {now:7.2f} {eager:8.2f} {now / eager:5.2f}x  (target <= 0.3 s)"
        )
    floor = median(args.repeat, lambda: python("pass"))
    print(f"{'(python -c pass)':<28} {floor:7.2f}")
    daemon = start_daemon(warm)
    try:
        print(f"\n{'command':<28} {'daemon':>7} {'own process':>12} {'no daemon':>10} {'ratio':>6}")
        modes = [  # (name, workspace, environment)
            ("daemon", warm, {}),
            ("own process, daemon's server", warm, {"ODFD_NO_DAEMON": "1"}),
            ("no daemon", cold, {}),
        ]
        steps = [
            ("ingest small file", ["ingest", "match.scores", str(SMALL_FILE)], 2.0),
            ("pull (Spark transform)", ["pull", "match.leaderboard"], 2.5),
            ("verify --recursive", ["verify", "--recursive", "match.leaderboard"], 2.5),
            ("sql --engine spark", ["sql", "--engine", "spark", QUERY], None),
        ]
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for mode, root, env in modes:
                reset(root)
                for name, argv, _target in steps:
                    seconds = odfd(root, *argv, env=env)
                    times.setdefault((name, mode), []).append(seconds)
                    print(f"  run: {name} ({mode}) {seconds:.2f} s", flush=True)
        for name, _argv, target in steps:
            daemon_s, own_s, cold_s = (statistics.median(times[(name, m)]) for m, _, _ in modes)
            goal = f"  (target <= {target} s)" if target else ""
            print(
                f"{name:<28} {daemon_s:7.2f} {own_s:12.2f} {cold_s:10.2f} "
                f"{daemon_s / own_s:5.2f}x{goal}"
            )
        print("ratio: daemon / own process (a Spark Connect client process per command)")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(120)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
