"""The ``odfd`` program's quick exit: garbage is still finalized, the command's code and output
are kept, and only the program (not the in-process ``main``) freezes the collector."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from odfd.cli.main import freeze_for_exit, main

REPO = Path(__file__).resolve().parents[2]


class _Cycle:
    finalized: list[str] = []

    def __init__(self, name: str) -> None:
        self.name = name
        self.me = self

    def __del__(self) -> None:
        _Cycle.finalized.append(self.name)


def test_garbage_is_finalized_before_the_rest_is_frozen() -> None:
    gc.disable()  # no automatic pass may free the garbage first
    try:
        _Cycle("garbage")  # unreachable at once, but only the cycle collector can free it
        kept = _Cycle("kept")
        freeze_for_exit()
        assert _Cycle.finalized == ["garbage"]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()
    del kept
    gc.collect()
    assert _Cycle.finalized == ["garbage", "kept"]


def test_main_leaves_the_collector_alone(tmp_path: Path) -> None:
    """``main`` may run in a process that goes on (a test, an embedding program): it must not
    freeze anything."""
    assert gc.get_freeze_count() == 0
    assert main(["init", "--root", str(tmp_path / "ws")]) == 0
    assert gc.get_freeze_count() == 0


def test_the_program_keeps_its_exit_code_and_output(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    done = subprocess.run(
        [sys.executable, "-m", "odfd", "init", "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert (root / "catalog.sqlite").exists()
    again = subprocess.run(
        [sys.executable, "-m", "odfd", "log", "no-such-dataset", "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert again.returncode == 1
    assert "no-such-dataset" in again.stderr


def _arrow_pool(env: dict[str, str]) -> str:
    """The memory pool Arrow allocates from in a process that starts as the `odfd` program."""
    code = (
        "from odfd.cli.main import prefer_arrow_memory_pool\n"
        "prefer_arrow_memory_pool()\n"
        "import pyarrow as pa\n"
        "pa.array([1, 2, 3])\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_program_allocates_arrow_memory_from_jemalloc_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _arrow_pool(env) == "jemalloc"
    assert _arrow_pool({**env, "ARROW_DEFAULT_MEMORY_POOL": "system"}) == "system"
