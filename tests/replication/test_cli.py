"""The commands as a user runs them: ``odfd serve`` in one process, ``odfd pull`` / ``odfd push``
from another workspace in others, over loopback."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.workspace import Workspace
from tests.replication.conftest import PUSH_TOKEN
from tests.replication.datagen import create_root, verify_integrity


def odfd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfd.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "server-node"

    async def prepare() -> None:
        async with await Workspace.init(root) as workspace:
            await create_root(workspace, "cities", slices=2)

    asyncio.run(prepare())
    with open(root / "config.toml", "a") as config:
        config.write(f'\n[server]\npush_tokens = ["{PUSH_TOKEN}"]\n')
    process = subprocess.Popen(
        [sys.executable, "-m", "odfd.cli.main", "serve", "--root", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving 1 dataset(s) at http://127.0.0.1:"), (
            line + process.stderr.read()
        )
        yield root, line.split(" at ")[1].split()[0]  # the URL, without "(console: ...)"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 130


def test_serve_pull_push_round_trip(served: tuple[Path, str], tmp_path: Path) -> None:
    server_root, url = served
    client = tmp_path / "client-node"
    assert odfd("init", "--root", str(client)).returncode == 0

    pulled = odfd("pull", url + "cities", "--root", str(client))
    assert pulled.returncode == 0, pulled.stderr
    assert "Updated: cities from" in pulled.stderr and "by smart protocol" in pulled.stderr
    verified = odfd("verify", "cities", "--integrity-only", "--root", str(client))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    again = odfd("pull", "cities", "--root", str(client))
    assert (
        again.returncode == 0 and "Skipped: cities" in again.stderr and "up to date" in again.stderr
    )

    same = odfd("push", "cities", url + "cities", "--root", str(client), "--token", PUSH_TOKEN)
    assert same.returncode == 0 and "Skipped: cities" in same.stderr and "up to date" in same.stderr

    async def create_and_check() -> None:
        async with await Workspace.open(client) as workspace:
            await verify_integrity(await workspace.get_dataset("cities"))
            await create_root(workspace, "mine", slices=1, seed=5)

    asyncio.run(create_and_check())
    refused = odfd(
        "push", "mine", url + "alice/mine", "--root", str(client), env={"ODFD_TOKEN": ""}
    )
    assert (
        refused.returncode == 1
        and refused.stderr.startswith("error:")
        and "token" in refused.stderr
    )
    pushed = odfd(
        "push", "mine", url + "alice/mine", "--root", str(client), env={"ODFD_TOKEN": PUSH_TOKEN}
    )
    assert pushed.returncode == 0 and "Pushed: mine: 3 block(s), 2 object(s)" in pushed.stderr, (
        pushed.stderr
    )
    with urllib.request.urlopen(url) as response:
        listing = {d["alias"]: d for d in json.load(response)["datasets"]}
    assert sorted(listing) == ["alice/mine", "cities"]
    renamed = odfd(
        "push", "mine", url + "alice/other", "--root", str(client), "--token", PUSH_TOKEN
    )
    assert renamed.returncode == 1 and "already holds dataset" in renamed.stderr


def test_pull_errors_are_reported_without_traceback(
    served: tuple[Path, str], tmp_path: Path
) -> None:
    _, url = served
    client = tmp_path / "client-node"
    odfd("init", "--root", str(client))
    missing = odfd("pull", url + "nothing-here", "--root", str(client))
    assert (
        missing.returncode == 1
        and missing.stderr.startswith("error:")
        and "Traceback" not in missing.stderr
    )
    bad = odfd("pull", "gopher://x/y", "--root", str(client))
    assert bad.returncode == 1 and "unsupported URL" in bad.stderr
