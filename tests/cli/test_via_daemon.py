"""Engine commands run by the workspace's daemon for a thin CLI (``odfd.cli.via_daemon``).

One real ``odfd daemon`` with its own Spark Connect server runs on ``node``; ``twin`` is the same
example without a daemon, whose commands run in their own process (``--no-daemon``) as a client of
the node's Connect server (so no second JVM starts). Through the daemon a command prints the same
bytes and exits with the same code as in its own process, and leaves the same data; errors stay
one line; without a daemon, with ``--no-daemon`` or ``ODFD_NO_DAEMON=1``, or with a different
environment, the command runs in its own process; Ctrl-C interrupts it in the daemon and moves
no head.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.processes import (
    DaemonProcess,
    daemon_with_connect,
    init_workspace,
    wait_for,
)
from verifier.engine.spark.choice import live_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "leaderboard"
DATA = EXAMPLE / "data"
LOCAL = "running here, not in the daemon"
HASH = re.compile(r"\b[fz][0-9a-zA-Z]{40,}\b")


def run(
    *args: str, root: Path, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "odfd", *args, "--root", str(root)],
        capture_output=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def ok(done: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert done.returncode == 0, done.stderr.decode()
    return done


def jobs(node: DaemonProcess) -> int:
    """Commands the daemon has run for clients so far (its log says each)."""
    return node.log().count("running a command for a client")


def records(root: Path, alias: str) -> list[dict[str, Any]]:
    """The dataset's records but their ``system_time`` (each ingest and transform stamps its
    own), in offset order."""
    query = f'SELECT * FROM "{alias}" ORDER BY "offset"'
    rows = json.loads(ok(run("sql", query, "-o", "json", root=root)).stdout)
    return [{k: v for k, v in row.items() if k != "system_time"} for row in rows]


def head(root: Path, alias: str) -> str:
    blocks = json.loads(ok(run("log", alias, "-o", "json", root=root)).stdout)
    return json.dumps(blocks[0], sort_keys=True)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    root = tmp_path_factory.mktemp("via-daemon") / "node"
    init_workspace(root, '\n[daemon]\nshutdown_timeout = "5s"\n')
    ok(run("add", str(EXAMPLE), root=root))
    with daemon_with_connect(root) as process:
        yield process


@pytest.fixture(scope="module")
def twin(node: DaemonProcess) -> tuple[Path, dict[str, str]]:
    """The example without a daemon, and the environment its local runs use (``--no-daemon`` is
    given on the command line)."""
    root = node.root.parent / "twin"
    init_workspace(root)
    ok(run("add", str(EXAMPLE), root=root))
    record = live_server(node.root)
    assert record is not None
    return root, {"ODFD_SPARK_REMOTE": record.address.url}


def test_commands_run_in_the_daemon_print_and_leave_what_a_local_run_does(
    node: DaemonProcess, twin: tuple[Path, dict[str, str]]
) -> None:
    twin_root, twin_env = twin
    before = jobs(node)
    steps = [
        ("ingest", "match.scores", str(DATA / "1.ndjson")),
        ("pull", "match.leaderboard"),
    ]
    for argv in steps:
        remote = run(*argv, root=node.root)
        local = run("--no-daemon", *argv, root=twin_root, env=twin_env)
        assert remote.returncode == local.returncode == 0, remote.stderr + local.stderr
        # block hashes differ (dataset keys, system times); everything else is the same bytes
        assert HASH.sub("#", remote.stderr.decode()) == HASH.sub("#", local.stderr.decode())
        assert HASH.sub("#", remote.stdout.decode()) == HASH.sub("#", local.stdout.decode())
    assert jobs(node) == before + len(steps)
    for alias in ("match.scores", "match.leaderboard"):
        data = records(node.root, alias)
        assert data and data == records(twin_root, alias)
    # verify: on the same workspace, once its cache holds what the daemon's own audits found
    verify = ("verify", "--recursive", "match.leaderboard")
    ok(run(*verify, root=node.root))
    remote, local = run(*verify, root=node.root), run("--no-daemon", *verify, root=node.root)
    assert (remote.returncode, remote.stdout, remote.stderr) == (0, local.stdout, local.stderr)
    assert b"reproducibility      ok" in remote.stdout

    query = "SELECT player, max(score) AS best FROM `match.scores` GROUP BY player ORDER BY player"
    for argv in (
        ("sql", "--engine", "spark", query, "-o", "csv"),
        ("sql", 'SELECT count(*) AS n FROM "match.leaderboard"', "-o", "json"),
    ):
        remote, local = run(*argv, root=node.root), run("--no-daemon", *argv, root=node.root)
        assert (remote.returncode, remote.stdout, remote.stderr) == (0, local.stdout, b"")
        assert remote.stdout.count(b"\n") > 1
    assert jobs(node) == before + len(steps) + 2 + 2 + 2  # records, verify, sql


_PROBE = """
import json, sys
from odfd.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": sorted({n.split(".")[0] for n in sys.modules})}))
"""


def _client_modules(*argv: str, root: Path) -> tuple[list[str], set[str]]:
    """The lines ``odfd ARGV`` printed on stdout and the top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv, "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    *printed, report = done.stdout.strip().splitlines()
    probe = json.loads(report)
    assert probe["code"] == 0, done.stderr
    return printed, set(probe["loaded"])


#: What a thin client has no use for: the engines, the HTTP client, and the daemon's own event
#: loop and catalog (each a cost at every forwarded command's start, issue 30's <= 1.05x).
NOT_IN_A_CLIENT = {"pyspark", "py4j", "datafusion", "pandas", "pyarrow", "grpc", "aiohttp"} | {
    "asyncio",
    "aiosqlite",
    "sqlite3",
}


def test_the_client_of_a_daemon_imports_no_engine_nor_event_loop(
    node: DaemonProcess, tmp_path: Path
) -> None:
    query = "SELECT count(*) AS n FROM `match.scores`"
    result, loaded = _client_modules(
        "sql", "--engine", "spark", query, "-o", "json", root=node.root
    )
    assert json.loads("\n".join(result))[0]["n"] > 0
    assert NOT_IN_A_CLIENT & loaded == set()
    row = tmp_path / "row.ndjson"
    row.write_text(
        '{"match_time": "2024-07-01T18:00:00Z", "match_id": 9001, "player": "x", "score": 1}\n'
    )
    before = jobs(node)
    for argv in (("ingest", "match.scores", str(row)), ("pull", "match.leaderboard")):
        _, loaded = _client_modules(*argv, root=node.root)
        assert NOT_IN_A_CLIENT & loaded == set()
    assert jobs(node) == before + 2


def test_errors_are_one_line_and_the_same_as_a_local_run(
    node: DaemonProcess, tmp_path: Path
) -> None:
    bad_row = tmp_path / "bad.ndjson"
    bad_row.write_text('{"match_time": "2024-05-01T18:00:00Z", "match_id": "x", "player": 1}\n{\n')
    head_before = head(node.root, "match.scores")
    for argv in (
        ("sql", "--engine", "spark", "SELECT no_such_column FROM `match.scores`"),
        ("ingest", "match.scores", "bad.ndjson"),  # relative: the client's folder, not the daemon's
        ("sql", "--engine", "nope", "SELECT 1"),  # argparse's usage error, printed by the daemon
    ):
        remote = run(*argv, root=node.root, cwd=tmp_path)
        local = run("--no-daemon", *argv, root=node.root, cwd=tmp_path)
        assert remote.returncode != 0 and remote.stdout == b""
        assert (remote.returncode, remote.stdout, remote.stderr) == (
            local.returncode,
            local.stdout,
            local.stderr,
        )
        if argv[1] != "--engine" or argv[2] != "nope":
            assert remote.stderr.count(b"\n") == 1 and remote.stderr.startswith(b"error: ")
    assert b"bad.ndjson" in run("ingest", "match.scores", "bad.ndjson", root=node.root).stderr
    assert head(node.root, "match.scores") == head_before


def test_opting_out_or_a_different_environment_runs_the_command_here(node: DaemonProcess) -> None:
    query = ("sql", "SELECT 1 AS one", "-o", "json", "-v")
    before = jobs(node)
    assert (
        f"{LOCAL}: --no-daemon was given"
        in ok(run("--no-daemon", *query, root=node.root)).stderr.decode()
    )
    opted = ok(run(*query, root=node.root, env={"ODFD_NO_DAEMON": "1"}))
    assert f"{LOCAL}: ODFD_NO_DAEMON is set" in opted.stderr.decode()
    other = ok(run(*query, root=node.root, env={"ODFD_SPARK_DRIVER_MEMORY": "3g"}))
    assert "environment differs in ODFD_SPARK_DRIVER_MEMORY" in other.stderr.decode()
    assert json.loads(opted.stdout) == [{"one": 1}]
    assert jobs(node) == before
    status = json.loads(ok(run("engine", "status", "-o", "json", root=node.root)).stdout)
    assert status["commands"]["ingest"]["runsIn"] == "daemon"
    assert status["commands"]["verify"]["runsIn"] == "daemon"


def test_without_a_daemon_the_command_runs_here(
    node: DaemonProcess, twin: tuple[Path, dict[str, str]]
) -> None:
    twin_root, _ = twin
    query = ("sql", "SELECT 1 AS one", "-o", "json", "-v")
    done = ok(run(*query, root=twin_root))
    assert f"{LOCAL}: no daemon answers" in done.stderr.decode()
    # a socket left by a killed daemon: nobody listens on it
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(twin_root / "daemon.sock"))
    stale.close()
    try:
        done = ok(run(*query, root=twin_root))
        assert f"{LOCAL}: no daemon answers" in done.stderr.decode()
        assert json.loads(done.stdout) == [{"one": 1}]
        status = json.loads(ok(run("engine", "status", "-o", "json", root=twin_root)).stdout)
        assert status["commands"]["ingest"]["runsIn"] == "this process"
    finally:
        (twin_root / "daemon.sock").unlink()


def test_ctrl_c_interrupts_the_command_in_the_daemon_and_commits_nothing(
    node: DaemonProcess, tmp_path: Path
) -> None:
    big = tmp_path / "big.ndjson"
    with big.open("w") as file:
        for n in range(400_000):
            file.write(
                f'{{"match_time": "2024-06-01T18:00:00Z", "match_id": {n}, '
                f'"player": "p{n % 97}", "score": {n % 1000}}}\n'
            )
    head_before = head(node.root, "match.scores")
    before = jobs(node)
    client = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odfd",
            "ingest",
            "match.scores",
            str(big),
            "--root",
            str(node.root),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    wait_for("the daemon to take the command", lambda: jobs(node) > before, 60)
    time.sleep(1.0)
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=300)
    assert (client.returncode, out, err) == (130, b"", b"interrupted\n")
    assert head(node.root, "match.scores") == head_before
    ok(run("verify", "--integrity-only", "match.scores", root=node.root))
    # the daemon still runs commands, and the file can be ingested afterwards
    small = tmp_path / "small.ndjson"
    small.write_text((DATA / "3.ndjson").read_text())
    done = ok(run("ingest", "match.scores", str(small), root=node.root))
    assert b"Ingested: match.scores" in done.stderr
    assert jobs(node) == before + 3


_COLLECTED_SESSIONS = """
import gc, sys, threading
from verifier.engine.spark import session
from verifier.engine.spark.settings import SparkSettings

session.configure(SparkSettings(remote=sys.argv[1]))
session.get_spark()
gc.set_threshold(20, 1, 1)  # collections at allocations of every thread, PySpark's own included
failures = []

def transactions():
    for n in range(40):
        spark = session.isolated_session()
        try:
            assert spark.range(0, 100 + n).selectExpr("sum(id)").toArrow().num_rows == 1
        except Exception as err:
            failures.append(repr(err))
        spark.cycle = spark  # left to the cyclic collector, as a failed transaction's session is

threads = [threading.Thread(target=transactions) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(failures), failures[:3])
"""


def test_sessions_collected_in_any_thread_leave_the_engine_working(node: DaemonProcess) -> None:
    """A Connect session collected at any moment (a cancelled transaction's, for one) once shut
    down PySpark's shared ReleaseExecute pool from its ``__del__``: every later query of the
    process then failed, or blocked for good (the daemon's next ingest hung, and it did not stop)."""
    record = live_server(node.root)
    assert record is not None
    done = subprocess.run(
        [sys.executable, "-c", _COLLECTED_SESSIONS, record.address.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "0 []", done.stderr[-3000:]
    assert "Exception ignored" not in done.stderr, done.stderr[-3000:]
