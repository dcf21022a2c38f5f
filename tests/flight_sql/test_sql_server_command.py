"""``odfd sql server`` as a user runs it: a process serving the workspace with its
``config.toml``'s tokens and private datasets, stopped cleanly by Ctrl-C."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import kamu
import pytest

from odfd.app.forwarding import serves_here
from storage.workspace import Workspace
from tests.flight_sql.conftest import READ_TOKEN
from tests.verifier.builders import root_with_slices

REPO = Path(__file__).resolve().parents[2]


def workspace_with_datasets(root: Path) -> None:
    async def build() -> None:
        async with await Workspace.init(root) as workspace:
            await root_with_slices(workspace, "nums", [[1, 2, 3]])
            await root_with_slices(workspace, "secret.nums", [[7]])

    asyncio.run(build())
    config = root / "config.toml"
    config.write_text(
        config.read_text() + f'[server]\nprivate = ["secret.%"]\nread_tokens = ["{READ_TOKEN}"]\n'
    )


def test_odfd_sql_server_serves_until_interrupted(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    workspace_with_datasets(root)
    process = subprocess.Popen(
        [sys.executable, "-m", "odfd", "sql", "server", "--port", "0", "--root", str(root)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:  # gRPC may log lines of its own first
            seen.append(line)
            found = re.search(r"listening on (grpc://127\.0\.0\.1:\d+)", line)
            if found:
                break
        assert found, "".join(seen)
        url = found.group(1)
        with kamu.connect(url) as con:
            assert con.query("select sum(value) as total from nums")["total"].tolist() == [6]
            with pytest.raises(Exception, match="table 'secret.nums' not found"):
                con.query('select * from "secret.nums"')
        with kamu.connect(url, token=READ_TOKEN) as con:
            assert con.query('select value from "secret.nums"')["value"].tolist() == [7]
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        rest = process.stderr.read()
        assert "Traceback" not in rest and "Fatal" not in rest, rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_odfd_sql_server_takes_no_query(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    workspace_with_datasets(root)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "odfd", "sql", "server", "-c", "select 1", "--root", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "takes no -c" in done.stderr
    assert time.monotonic() - started < 60


def test_a_port_in_use_is_reported(tmp_path: Path) -> None:
    import socket

    root = tmp_path / "ws"
    workspace_with_datasets(root)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "odfd",
                "sql",
                "server",
                "--port",
                str(port),
                "--root",
                str(root),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    # one line, as every mistake is: gRPC's own log lines of the failed bind stay off
    assert done.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port} for Flight SQL: Address already in use"
    ]


def test_the_daemon_never_takes_odfd_sql_server_over() -> None:
    assert serves_here("sql", ["--root", "ws", "sql", "server", "--port", "1"])
    assert not serves_here("sql", ["sql", "select * from nums"])
    assert not serves_here("pull", ["pull", "server"])
