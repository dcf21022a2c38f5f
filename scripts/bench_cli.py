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

With ``--baseline REV`` (a commit, e.g. ``main``) the same figures are measured, interleaved in the
same run, for the code at REV beside the working tree's (REV's files exported to a temporary
folder and put first on ``PYTHONPATH``; both run on this checkout's ``.venv``): each command with
a daemon of its own code and without a daemon, and the ratio now / baseline.

With ``--no-spark`` only the commands that need no engine are measured (a minute, not half an
hour: for checking start-up work against a baseline). With ``--callgrind`` (and ``--baseline``)
those commands are also counted in instructions under ``valgrind --tool=callgrind``, median of
``--repeat`` runs: a figure the machine's load does not move, for comparing start-up work. With
``--no-daemon-only`` only the Spark commands on a workspace without a daemon are measured (a JVM
per command: the slowest figures, a third of the full run's time). With ``--forwarded-only``
(and ``--baseline``) only the Spark commands a running daemon takes over are measured, each
beside the CPU its thin client process spent (a figure the load moves little: the client's
start-up, the daemon's work excluded).

Usage: ``.venv/bin/python scripts/bench_cli.py [--repeat 5] [--baseline REV] [--no-spark]
[--callgrind] [--no-daemon-only] [--forwarded-only]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import resource
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


def odfd(root: Path, *args: str, env: dict[str, str] | None = None, tree: Path = REPO) -> float:
    """Seconds one ``odfd ARGS`` process of the code in ``tree`` took (it must succeed)."""
    return odfd_with_cpu(root, *args, env=env, tree=tree)[0]


def odfd_with_cpu(
    root: Path, *args: str, env: dict[str, str] | None = None, tree: Path = REPO
) -> tuple[float, float]:
    """``odfd``'s seconds and the CPU seconds of the process itself (user + system: what the
    machine's load moves little, e.g. a thin client's start-up beside its daemon's work)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(
        [str(ODFD), *args],
        env={**os.environ, "ODFD_HOME": str(root), "PYTHONPATH": str(tree), **(env or {})},
        capture_output=True,
    )
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"odfd {' '.join(args)} failed:\n{done.stderr.decode()}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu


def instructions(root: Path, *args: str, tree: Path = REPO) -> int:
    """Instructions one ``odfd ARGS`` process of the code in ``tree`` ran (callgrind's count)."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out"]
            + [sys.executable, str(ODFD), *args],
            env={**os.environ, "ODFD_HOME": str(root), "PYTHONPATH": str(tree)},
            capture_output=True,
        )
    counted = re.search(rb"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or counted is None:
        raise RuntimeError(f"odfd {' '.join(args)} under callgrind failed:\n{done.stderr.decode()}")
    return int(counted.group(1))


def python(code: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True)
    return time.perf_counter() - began


def reset(root: Path, tree: Path = REPO) -> None:
    """The example's datasets, new and empty (every run does the same work)."""
    if any((root / "datasets").iterdir()):
        odfd(root, "delete", "--all", "--yes", tree=tree)
    odfd(root, "add", str(EXAMPLE), tree=tree)


def start_daemon(root: Path, tree: Path = REPO) -> subprocess.Popen[bytes]:
    log = open(root.parent / "daemon.log", "wb")
    daemon = subprocess.Popen(
        [str(ODFD), "daemon", "--port", "0"],
        env={
            **os.environ,
            "ODFD_HOME": str(root),
            "ODFD_DAEMON_SPARK_CONNECT": "true",
            "PYTHONPATH": str(tree),
        },
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 600
    while not (root / "engine.json").exists() or not (root / "daemon.json").exists():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the daemon did not start; see {root.parent / 'daemon.log'}")
        time.sleep(0.5)
    return daemon


def byte_compile(tree: Path = REPO) -> None:
    """odfd as pip installs it, byte-compiled (as ``scripts/setup`` leaves it), so no run pays
    for compiling sources an earlier edit left stale."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", "odfd", "protocol", "storage"]
        + ["verifier"],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def export(revision: str, into: Path) -> Path:
    """The files of ``revision`` (the packages only), byte-compiled, in ``into``."""
    into.mkdir()
    archive = subprocess.run(
        ["git", "archive", revision, "odfd", "protocol", "storage", "verifier"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    byte_compile(into)
    return into


def median(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument(
        "--baseline", metavar="REV", help="also measure the code at commit REV, for ratios"
    )
    parser.add_argument(
        "--no-spark", action="store_true", help="measure only the commands that need no engine"
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="with --baseline: also count the engine-less commands' instructions (valgrind)",
    )
    parser.add_argument(
        "--no-daemon-only",
        action="store_true",
        help="measure only the Spark commands on a workspace without a daemon",
    )
    parser.add_argument(
        "--forwarded-only",
        action="store_true",
        help="with --baseline: measure only the Spark commands run by a daemon",
    )
    args = parser.parse_args()
    if (args.callgrind or args.forwarded_only) and args.baseline is None:
        parser.error("--callgrind and --forwarded-only need --baseline")
    only = args.no_daemon_only + args.forwarded_only
    if only and (args.no_spark or args.callgrind) or only > 1:
        parser.error(
            "--no-daemon-only and --forwarded-only measure only Spark commands, one of them "
            "(no --no-spark, --callgrind)"
        )
    byte_compile()
    work = Path(tempfile.mkdtemp(prefix="odfd-bench-cli-"))
    try:
        if args.baseline is None:
            against_today(work, args.repeat, spark=not args.no_spark, only_cold=args.no_daemon_only)
        else:
            baseline = export(args.baseline, work / "baseline")
            against_baseline(
                work,
                args.repeat,
                baseline,
                spark=not args.no_spark,
                callgrind=args.callgrind,
                only_cold=args.no_daemon_only,
                only_forwarded=args.forwarded_only,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def workspaces(work: Path, *names: str, tree: Path = REPO) -> list[Path]:
    """Fresh workspaces made by the code in ``tree`` (a baseline cannot open a newer catalog)."""
    roots = []
    for name in names:
        root = work / name / "ws"
        root.parent.mkdir()
        odfd(root, "init", tree=tree)
        reset(root, tree)
        roots.append(root)
    return roots


NO_ENGINE = (["--help"], ["list"], ["log", "match.scores"], ["status"], ["tail", "match.scores"])
SPARK_STEPS = [  # (name, arguments, target seconds with a daemon)
    ("ingest small file", ["ingest", "match.scores", str(SMALL_FILE)], 2.0),
    ("pull (Spark transform)", ["pull", "match.leaderboard"], 2.5),
    ("verify --recursive", ["verify", "--recursive", "match.leaderboard"], 2.5),
    ("sql --engine spark", ["sql", "--engine", "spark", QUERY], None),
]


def against_today(work: Path, repeat: int, *, spark: bool = True, only_cold: bool = False) -> None:
    """Today's commands beside how they ran before: eager imports, no daemon (``only_cold``:
    only the Spark commands without a daemon)."""
    if only_cold:
        (cold,) = workspaces(work, "local")
        _no_daemon_only({"now": (REPO, cold)}, repeat)
        return
    warm, cold = workspaces(work, "daemon", "local")
    # commands that need no engine, on a quiet machine: before the daemon (and its JVM) starts
    print(f"median of {repeat} whole-process runs each (seconds)")
    eager = median(repeat, lambda: python(EAGER_IMPORTS))
    print(f"{'command':<28} {'now':>7} {'before':>8} {'ratio':>6}")
    for argv in NO_ENGINE[:4]:
        now = median(repeat, functools.partial(odfd, cold, *argv))
        print(
            f"{' '.join(argv):<28} {now:7.2f} {eager:8.2f} {now / eager:5.2f}x  (target <= 0.3 s)"
        )
    floor = median(repeat, lambda: python("pass"))
    print(f"{'(python -c pass)':<28} {floor:7.2f}")
    if not spark:
        return
    daemon = start_daemon(warm)
    try:
        print(f"\n{'command':<28} {'daemon':>7} {'own process':>12} {'no daemon':>10} {'ratio':>6}")
        modes = [  # (name, workspace, environment)
            ("daemon", warm, {}),
            ("own process, daemon's server", warm, {"ODFD_NO_DAEMON": "1"}),
            ("no daemon", cold, {}),
        ]
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(repeat):
            for mode, root, env in modes:
                reset(root)
                for name, argv, _target in SPARK_STEPS:
                    seconds = odfd(root, *argv, env=env)
                    times.setdefault((name, mode), []).append(seconds)
                    print(f"  run: {name} ({mode}) {seconds:.2f} s", flush=True)
        for name, _argv, target in SPARK_STEPS:
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


def against_baseline(
    work: Path,
    repeat: int,
    baseline: Path,
    *,
    spark: bool = True,
    callgrind: bool = False,
    only_cold: bool = False,
    only_forwarded: bool = False,
) -> None:
    """Every figure for the working tree and for ``baseline``, runs interleaved so that a change
    in the machine's load touches both alike (``only_cold``: only the Spark commands without a
    daemon; ``only_forwarded``: only those with one)."""
    trees = {"now": REPO, "baseline": baseline}
    if only_forwarded:
        _forwarded_only(work, trees, repeat)
        return
    cold = {tree: workspaces(work, f"local-{tree}", tree=code)[0] for tree, code in trees.items()}
    if only_cold:
        _no_daemon_only({tree: (trees[tree], cold[tree]) for tree in trees}, repeat)
        return
    warm = {tree: workspaces(work, f"daemon-{tree}", tree=code)[0] for tree, code in trees.items()}
    print(f"median of {repeat} whole-process runs each (seconds); baseline: {baseline}")
    print(f"{'command':<34} {'now':>7} {'baseline':>9} {'ratio':>6}")
    for argv in NO_ENGINE:
        runs: dict[str, list[float]] = {tree: [] for tree in trees}
        for round in range(repeat):
            for tree, code in _in_turn(trees, round):
                runs[tree].append(odfd(cold[tree], *argv, tree=code))
        now, before = (statistics.median(runs[tree]) for tree in trees)
        goal = "  (target <= 0.3 s)" if argv[0] != "tail" else ""
        print(f"{' '.join(argv):<34} {now:7.2f} {before:9.2f} {now / before:5.2f}x{goal}")
    if callgrind:
        print(f"\nmedian of {repeat} callgrind counts each (millions of instructions)")
        for argv in NO_ENGINE:
            counts: dict[str, list[int]] = {tree: [] for tree in trees}
            for round in range(repeat):
                for tree, code in _in_turn(trees, round):
                    counts[tree].append(instructions(cold[tree], *argv, tree=code))
            now_i, before_i = (statistics.median(counts[tree]) for tree in trees)
            print(
                f"{' '.join(argv):<34} {now_i / 1e6:7.1f} {before_i / 1e6:9.1f} "
                f"{now_i / before_i:5.3f}x"
            )
    if not spark:
        return
    daemons = [start_daemon(warm[tree], code) for tree, code in trees.items()]
    try:
        modes = [("daemon", warm, {}), ("no daemon", cold, {"ODFD_NO_DAEMON": "1"})]
        times: dict[tuple[str, str, str], list[float]] = {}
        for round in range(repeat):
            for mode, roots, env in modes:
                for tree, code in _in_turn(trees, round):
                    reset(roots[tree], code)
                    for name, argv, _target in SPARK_STEPS:
                        seconds = odfd(roots[tree], *argv, env=env, tree=code)
                        times.setdefault((name, mode, tree), []).append(seconds)
                        print(f"  run: {name} ({mode}, {tree}) {seconds:.2f} s", flush=True)
        for mode, _roots, _env in modes:
            for name, _argv, _target in SPARK_STEPS:
                now, before = (statistics.median(times[(name, mode, tree)]) for tree in trees)
                label = f"{name} ({mode})"
                print(f"{label:<34} {now:7.2f} {before:9.2f} {now / before:5.2f}x")
        print("ratio: now / baseline (target <= 1.05x)")
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
        for daemon in daemons:
            daemon.wait(120)


def _forwarded_only(work: Path, trees: dict[str, Path], repeat: int) -> None:
    """The Spark commands run by a warm daemon of each tree's code, runs interleaved: the
    medians of their seconds and of their client processes' CPU seconds, and the ratios."""
    warm = {tree: workspaces(work, f"daemon-{tree}", tree=code)[0] for tree, code in trees.items()}
    daemons = [start_daemon(warm[tree], code) for tree, code in trees.items()]
    try:
        for tree, code in trees.items():  # untimed: each daemon's first command is cold
            reset(warm[tree], code)
            for _name, argv, _target in SPARK_STEPS:
                odfd(warm[tree], *argv, tree=code)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round in range(repeat):
            for tree, code in _in_turn(trees, round):
                reset(warm[tree], code)
                for name, argv, _target in SPARK_STEPS:
                    seconds, cpu = odfd_with_cpu(warm[tree], *argv, tree=code)
                    times.setdefault((name, tree), []).append((seconds, cpu))
                    print(f"  run: {name} ({tree}) {seconds:.2f} s, client CPU {cpu:.3f} s")
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
        for daemon in daemons:
            daemon.wait(120)
    print(f"median of {repeat} runs each (seconds), commands run by a daemon")
    print(f"{'command (daemon)':<28} {'now':>6} {'baseline':>9} {'ratio':>6}   client CPU")
    for name, _argv, _target in SPARK_STEPS:
        (now, now_cpu), (before, before_cpu) = (
            (statistics.median(s for s, _ in runs), statistics.median(c for _, c in runs))
            for runs in (times[(name, tree)] for tree in trees)
        )
        print(
            f"{name:<28} {now:6.2f} {before:9.2f} {now / before:5.2f}x   "
            f"{now_cpu:.3f} vs {before_cpu:.3f} s {now_cpu / before_cpu:5.2f}x"
        )
    print("ratio: now / baseline (target <= 1.05x)")


def _no_daemon_only(trees: dict[str, tuple[Path, Path]], repeat: int) -> None:
    """The Spark commands without a daemon for each tree (its code, its workspace), runs
    interleaved; with two trees, the ratio of the first to the second."""
    print(f"median of {repeat} whole-process runs each (seconds), no daemon: a JVM per command")
    codes = {tree: code for tree, (code, _root) in trees.items()}
    times: dict[tuple[str, str], list[float]] = {}
    for round in range(repeat):
        for tree, code in _in_turn(codes, round):
            root = trees[tree][1]
            reset(root, code)
            for name, argv, _target in SPARK_STEPS:
                seconds = odfd(root, *argv, env={"ODFD_NO_DAEMON": "1"}, tree=code)
                times.setdefault((name, tree), []).append(seconds)
                print(f"  run: {name} ({tree}) {seconds:.2f} s", flush=True)
    print(f"{'command (no daemon)':<34} " + " ".join(f"{tree:>9}" for tree in trees))
    for name, _argv, _target in SPARK_STEPS:
        medians = [statistics.median(times[(name, tree)]) for tree in trees]
        ratio = f" {medians[0] / medians[1]:5.2f}x" if len(medians) == 2 else ""
        print(f"{name:<34} " + " ".join(f"{m:9.2f}" for m in medians) + ratio)
    if len(trees) == 2:
        print("ratio: now / baseline (target <= 1.05x)")


def _in_turn(trees: dict[str, Path], round: int) -> list[tuple[str, Path]]:
    """The trees, the first of them going first in even rounds and last in odd ones, so that
    neither always runs right after the other's work."""
    ordered = list(trees.items())
    return ordered if round % 2 == 0 else ordered[::-1]


if __name__ == "__main__":
    main()
