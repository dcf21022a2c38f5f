"""Helpers for CLI tests: running ``odfd`` in-process and fingerprinting a workspace on disk."""

from __future__ import annotations

import hashlib
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


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its content; SQLite's ``-wal``/``-shm`` side files
    are left out (opening the catalog may touch them without changing anything)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(("-wal", "-shm"))
    }
