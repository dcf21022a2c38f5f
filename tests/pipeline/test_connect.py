"""Spark Connect and a standalone cluster, end to end.

One standalone master and worker from the pyspark package run on loopback; one ``odfd daemon``
runs its own Spark Connect server on that master. Through it: the leaderboard pipeline gives the
same logical hashes, query result and verdicts as the tests' local session; CLI commands on the
daemon's workspace use the daemon's server (no JVM of their own) and fail with one-line errors;
the server is restarted when it dies, stopped with the daemon, and exits when the daemon is killed
(kill -9). The tests run in this order.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.daemon.processes import (
    CONNECT_START_TIMEOUT,
    DaemonProcess,
    daemon_with_connect,
    init_workspace,
    odfd,
    wait_for,
)
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.connect_pipeline import run_pipeline
from verifier.engine.spark.choice import SERVER_RECORD, ServerRecord, live_server
from verifier.engine.spark.connect_server import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "leaderboard" / "data"
SPARK_HOME = Path(pyspark.__file__).parent


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://`` URL of a standalone master with one worker (2 cores), both on loopback."""
    folder = tmp_path_factory.mktemp("standalone")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    commands = [
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        + ["--port", str(port), "--webui-port", str(free_port())],
        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"]
        + ["--webui-port", str(free_port()), "--cores", "2", "--memory", "2g"]
        + ["--work-dir", str(folder / "work"), url],
    ]
    processes = []
    try:
        for n, command in enumerate(commands):  # the worker retries until the master listens
            with open(folder / f"{n}.log", "wb") as log:
                processes.append(
                    subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
                )
        wait_for(
            "the worker to register with the master",
            lambda: (
                "Successfully registered with master"
                in (folder / "1.log").read_text(errors="replace")
            ),
            CONNECT_START_TIMEOUT,
            detail=lambda: (folder / "1.log").read_text(errors="replace")[-2000:],
        )
        yield url
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(30)


@pytest.fixture(scope="module")
def daemon(master: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    root = tmp_path_factory.mktemp("connect") / "node"
    init_workspace(
        root,
        f'\n[spark]\nmaster = "{master}"\ndriver_memory = "1g"\n'
        '[spark.conf]\n"spark.executor.memory" = "1g"\n'
        '[daemon]\nshutdown_timeout = "5s"\n',
    )
    with daemon_with_connect(root) as process:
        yield process


def _record(root: Path) -> dict[str, int]:
    return json.loads((root / SERVER_RECORD).read_text())


def test_the_pipeline_through_connect_on_a_cluster_equals_a_local_session(
    daemon: DaemonProcess, spark: object, tmp_path: Path
) -> None:
    record = live_server(daemon.root)
    assert record is not None
    remote = subprocess.run(
        [sys.executable, "-m", "tests.pipeline.connect_pipeline", record.address.url, "remote"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert remote.returncode == 0, remote.stderr
    import asyncio

    local = asyncio.run(run_pipeline(tmp_path / "local", TEST_ENGINES))
    through_connect = json.loads(remote.stdout)
    staged = through_connect.pop("staged")
    assert through_connect == local
    # With shared_filesystem the slices of 4 ingests, 3 transforms and verify's 3 replays, and
    # both collections came back as files the server wrote into the workspace.
    assert staged == 4 + 3 + 3 + 2
    # a legacy ddlSchema is parsed without a classic SparkContext; NOT NULL is REQUIRED
    assert local["ddl schema"] == {
        "columns": [
            ["offset", False],
            ["op", False],
            ["system_time", False],
            ["event_time", False],
            ["city", True],
            ["population", False],
        ],
        "rows": [["kyiv", 3000], ["lviv", 700]],
    }
    assert local["verify"] == 0 and len(local["match.leaderboard logical hashes"]) == 3
    assert all("reproducible" in verdict for verdict in local["rejected"])
    assert local["staging folders left"] == []
    assert len(local["all types"]["batches"]) == 6 and local["all types"]["left"] == []
    failed = local["failing query"]
    assert failed["error"] == "ArithmeticException" and "CAST_OVERFLOW" in failed["message"]
    assert failed["left"] == []


def test_cli_commands_use_the_daemons_server_and_fail_in_one_line(daemon: DaemonProcess) -> None:
    root = daemon.root
    engines = json.loads(odfd("engine", "status", "-o", "json", root=root).stdout)
    commands = engines["commands"]
    assert {commands[c]["engine"] for c in ("ingest", "pull", "sql", "verify")} == {"connect"}
    assert "daemon" in engines["reason"]
    odfd("add", str(REPO / "examples" / "leaderboard"), root=root)
    odfd("ingest", "match.scores", str(DATA / "1.ndjson"), root=root)
    assert "3 new record(s)" in odfd("pull", "match.leaderboard", root=root).stderr
    query = "SELECT count(*) AS n FROM `match.leaderboard`"
    out = odfd("sql", query, "--engine", "spark", "-o", "json", root=root)
    assert json.loads(out.stdout) == [{"n": 3}]
    assert odfd("verify", "--recursive", "match.leaderboard", root=root).returncode == 0
    # A command that starts a JVM of its own logs there; these used the daemon's.
    assert not (root / "logs" / "spark.log").exists()

    bad_query = "SELECT no_such_column FROM `match.scores`"
    bad = odfd("sql", bad_query, "--engine", "spark", root=root, check=False)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: query is invalid")
    assert "no_such_column" in bad.stderr
    detailed = odfd("-v", "sql", bad_query, "--engine", "spark", root=root, check=False)
    assert detailed.returncode == 1 and "Traceback" in detailed.stderr


def test_the_server_is_restarted_after_a_crash(daemon: DaemonProcess) -> None:
    crashed = _record(daemon.root)
    os.kill(crashed["serverPid"], signal.SIGKILL)

    def restarted() -> ServerRecord | None:
        record = live_server(daemon.root)
        return record if record is not None and record.server_pid != crashed["serverPid"] else None

    record = wait_for("the restarted Spark Connect server", restarted, CONNECT_START_TIMEOUT)
    assert record.address.port == crashed["port"]
    out = odfd(
        "sql", "SELECT 40 + 2 AS answer", "--engine", "spark", "-o", "json", root=daemon.root
    )
    assert json.loads(out.stdout) == [{"answer": 42}]
    assert "spark connect server exited; restarting" in daemon.log()


def test_the_server_stops_with_the_daemon(daemon: DaemonProcess) -> None:
    server_pid = _record(daemon.root)["serverPid"]
    assert daemon.stop() == 0
    assert not (daemon.root / SERVER_RECORD).exists()
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)
    engines = json.loads(odfd("engine", "status", "-o", "json", root=daemon.root).stdout)
    assert engines["commands"]["sql"]["engine"] == "local"


def test_a_killed_daemon_leaves_no_server(daemon: DaemonProcess) -> None:
    daemon.start(timeout=CONNECT_START_TIMEOUT)
    server_pid = wait_for(
        "the Spark Connect server", lambda: live_server(daemon.root), 300
    ).server_pid
    daemon.kill()

    def gone() -> bool:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for("the killed daemon's Spark Connect server to exit", gone, 60)
