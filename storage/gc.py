"""``odfd system gc``: remove what interrupted runs left in a workspace, and settle orphans.

* the staging subfolders of processes that died (``storage.scratch``; every open does this too);
* first-pull staging folders (``datasets/.pull-*``) no running pull holds: their partial
  downloads would let that pull resume, and are given up;
* ``.pending-*`` files in dataset folders untouched for ``PENDING_MIN_AGE`` seconds;
* dataset folders the catalog does not know: adopted or removed (``storage.orphans``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from storage.orphans import OrphanAction, recover_orphans
from storage.scratch import PULL_PREFIX, remove_if_unlocked, stale_pending_files, sweep_staging
from storage.workspace import Workspace

PENDING_MIN_AGE = 60.0


@dataclass(slots=True)
class GcReport:
    removed: list[Path] = field(default_factory=list)
    orphans: list[OrphanAction] = field(default_factory=list)


async def collect_garbage(workspace: Workspace) -> GcReport:
    report = GcReport(removed=[*workspace.swept, *sweep_staging(workspace.layout.staging_dir)])
    datasets = workspace.layout.datasets_dir
    for entry in sorted(datasets.iterdir()) if datasets.is_dir() else []:
        if entry.name.startswith(PULL_PREFIX) and entry.is_dir():
            if remove_if_unlocked(entry):
                report.removed.append(entry)
        elif not entry.name.startswith(".") and entry.is_dir():
            for path in stale_pending_files(entry, PENDING_MIN_AGE):
                path.unlink(missing_ok=True)
                report.removed.append(path)
    report.orphans = await recover_orphans(workspace, min_age=PENDING_MIN_AGE)
    return report
