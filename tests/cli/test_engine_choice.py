"""Which engine a workspace's commands use: ``[spark] remote``, a daemon's live Connect server,
or a JVM of their own (no JVM is started here: the server is a listening socket)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.config import ConfigError, load_config
from verifier.engine.spark.choice import (
    SERVER_RECORD,
    ServerRecord,
    choose_engine,
    live_server,
    write_server_record,
)
from verifier.engine.spark.connect_server import ServerAddress
from verifier.engine.spark.settings import SparkSettings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_without_a_server_commands_start_their_own_jvm(tmp_path: Path) -> None:
    choice = choose_engine(tmp_path, SparkSettings(master="local[2]"))
    assert (choice.kind, choice.where, choice.settings.remote) == ("local", "local[2]", None)
    assert "starts its own JVM" in choice.reason


def test_a_configured_remote_wins_and_its_token_is_not_shown(tmp_path: Path) -> None:
    settings = SparkSettings(remote="sc://spark.example.org:15002/;token=secret")
    choice = choose_engine(tmp_path, settings)
    assert (choice.kind, choice.where) == ("connect", "sc://spark.example.org:15002")
    assert choice.settings is settings and "secret" not in choice.reason


def test_the_remote_comes_from_the_environment_too(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")
    loaded = load_config(config, env={"ODFD_SPARK_REMOTE": "sc://127.0.0.1:15002"})
    assert loaded.spark.remote == "sc://127.0.0.1:15002"
    with pytest.raises(ConfigError, match="not a Spark Connect URL"):
        load_config(config, env={"ODFD_SPARK_REMOTE": "spark://127.0.0.1:7077"})
    with pytest.raises(ConfigError, match="ODFD_DAEMON_SPARK_CONNECT_PORT"):
        load_config(config, env={"ODFD_DAEMON_SPARK_CONNECT_PORT": "70000"})


def test_a_live_daemon_server_is_used_with_its_token(tmp_path: Path, listening: int) -> None:
    address = ServerAddress(listening, "t0ken")
    write_server_record(tmp_path, ServerRecord(address, os.getpid(), os.getpid()))
    assert (tmp_path / SERVER_RECORD).stat().st_mode & 0o777 == 0o600
    choice = choose_engine(tmp_path, SparkSettings())
    assert choice.kind == "connect" and choice.where == f"sc://localhost:{listening}"
    assert choice.settings.remote == f"sc://localhost:{listening}/;token=t0ken"
    assert f"pid {os.getpid()}" in choice.reason


def test_a_record_of_a_dead_daemon_or_closed_port_is_ignored(
    tmp_path: Path, listening: int
) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    dead = int(gone.stdout)
    write_server_record(tmp_path, ServerRecord(ServerAddress(listening, "t"), os.getpid(), dead))
    assert live_server(tmp_path) is None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    write_server_record(
        tmp_path, ServerRecord(ServerAddress(closed, "t"), os.getpid(), os.getpid())
    )
    assert live_server(tmp_path) is None
    (tmp_path / SERVER_RECORD).write_text("{not json")
    assert choose_engine(tmp_path, SparkSettings()).kind == "local"


def test_engine_status_prints_the_choice(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    run = [sys.executable, "-m", "odfd"]
    subprocess.run([*run, "init", "--root", str(root)], check=True, capture_output=True, cwd=REPO)
    done = subprocess.run(
        [*run, "engine", "status", "-o", "json", "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "ODFD_SPARK_REMOTE": "sc://spark.example.org:15002"},
    )
    status = json.loads(done.stdout)
    assert status["commands"]["sql"] == {
        "engine": "connect",
        "where": "sc://spark.example.org:15002",
        "runsIn": "this process",
        "runsWhy": "no daemon runs on this workspace",
    }
    assert status["reason"] == "ODFD_SPARK_REMOTE names a Spark Connect server"
