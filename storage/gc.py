"""Finding the staging folders nobody holds, for ``odfd system gc``
(``odfd.coordinator.leftovers`` removes them with the other leftovers).

* the staging subfolders of processes that died (``storage.scratch``; every open removes those);
* first-pull staging folders (``datasets/.pull-*``) no running pull holds: their partial
  downloads would let that pull resume, and are given up.
"""

from __future__ import annotations

import os
from pathlib import Path

from storage.layout import WorkspaceLayout
from storage.scratch import PULL_PREFIX, try_lock_folder


def unheld_staging(layout: WorkspaceLayout) -> list[Path]:
    """Staging folders whose lock nobody holds (blocking: run it in a thread)."""
    candidates: list[Path] = []
    if layout.staging_dir.is_dir():
        candidates += sorted(p for p in layout.staging_dir.iterdir() if p.is_dir())
    if layout.datasets_dir.is_dir():
        candidates += sorted(
            p for p in layout.datasets_dir.iterdir() if p.name.startswith(PULL_PREFIX)
        )
    found = []
    for path in candidates:
        try:
            fd = try_lock_folder(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if fd is not None:
            os.close(fd)
            found.append(path)
    return found
