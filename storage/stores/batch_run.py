"""Starting ``batch_child`` (a folder store's large batch written by a process of its own) and
handing it the batch: one pipe write of every object's bytes, one answer back."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from storage.errors import StorageError
from storage.stores.batch_child import HEADER

_CHILD = Path(__file__).with_name("batch_child.py")


def run_batch_child(root: Path, stage: Path, stem: str, items: Sequence[bytes]) -> bytes | None:
    """``batch_child``'s answer for ``items`` stored in ``root``, staged in ``stage`` as
    ``<stem>.<n>`` (blocking: call from a thread); ``None`` if no child could be started (then
    nothing was written). A child that dies without answering raises ``StorageError``; the
    caller removes what it staged."""
    if not sys.executable:
        return None
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(_CHILD), str(os.getpid())],
            input=encode_batch(root, stage, stem, items),
            capture_output=True,
            check=False,
        )
    except (FileNotFoundError, PermissionError):  # the interpreter cannot be run
        return None
    if done.returncode != 0 or done.stdout[:1] not in (b"K", b"N", b"E"):
        reason = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [
            f"exit status {done.returncode}"
        ]
        raise StorageError(f"writing {len(items)} objects to {root} failed: {reason[0]}")
    return done.stdout


def encode_batch(root: Path, stage: Path, stem: str, items: Sequence[bytes]) -> bytes:
    """The child's input (``batch_child``'s docstring)."""
    paths = [str(root).encode(), str(stage).encode(), stem.encode()]
    header = HEADER.pack(*(len(p) for p in paths), len(items))
    sizes = struct.pack(f"<{len(items)}Q", *(len(item) for item in items))
    return b"".join([header, *paths, sizes, *items])


def remove_staged(stage: Path, stem: str) -> None:
    """What a child that failed or was killed left staged: ``<stem>.<n>`` files, or the
    ``<stem>.d`` folder of objects staged under their names."""
    for path in stage.glob(f"{stem}.*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
