"""The ``odfd`` program's quick exit: garbage is still finalized, the command's code and output
are kept, and only the program (not the in-process ``main``) freezes the collector."""

from __future__ import annotations

import gc
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
