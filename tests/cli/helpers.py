"""Helpers for CLI tests: running ``odfd`` in-process, serving a workspace with a real ``odfd
serve`` and fingerprinting a workspace on disk."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from odfd.cli.main import main

MANIFESTS = Path(__file__).parents[1] / "storage" / "manifests"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``odfd ARGV``; argument errors (argparse exits) too."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exit:
        code = int(exit.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@contextmanager
def odfd_serve(root: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``odfd serve`` of ``root`` in a subprocess on a free port: its URL and process (stopped
    with SIGINT, as a user's Ctrl-C, when the block exits)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "odfd.cli.main", "serve", "--root", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving"), line
        yield line.split(" at ")[1].split()[0], process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its content; SQLite's ``-wal``/``-shm`` side files
    are left out (opening the catalog may touch them without changing anything)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(("-wal", "-shm"))
    }
