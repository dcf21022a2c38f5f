"""What interrupted or losing work leaves in a workspace, and removing it (``odfd system gc``).

Nothing here is ever needed again, but nothing is removed while it might still be in use: every
function skips entries changed less than ``grace`` seconds ago, so a running ingest, transform or
pull (of this process, another command or the daemon) keeps its scratch files. One function per
kind of leftover:

* :func:`run_scratch` — transaction folders and stdin copies under ``run/`` (a killed command
  never reached its ``finally``), including empty ones;
* :func:`unreferenced_objects` — data and checkpoint files no block of the dataset's chain names
  (written by the loser of a race for ``refs/head``, or by a command killed before its commit);
* :func:`staging_folders` — the staging folders of dead processes and first pulls' partial
  ``datasets/.pull-*`` folders that no running pull holds (``storage.scratch`` locks);
* :func:`staging_files` — ``.pending-*`` files of an atomic write that was killed half-way, in a
  dataset's folders and in the datasets folder (an import that never finished).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odfd.coordinator.commit import RUN_DIR
from protocol.model import AddData, ExecuteTransform
from storage.gc import unheld_staging
from storage.layout import STAGING_PREFIX, DatasetLayout, object_name
from storage.workspace import Workspace


@dataclass(frozen=True, slots=True)
class Leftover:
    kind: str
    path: Path
    size: int


async def run_scratch(workspace: Workspace, grace: float) -> list[Leftover]:
    run_dir = workspace.root / RUN_DIR
    return await asyncio.to_thread(_old_entries, run_dir, "run scratch", grace, lambda _: True)


async def unreferenced_objects(workspace: Workspace, grace: float) -> list[Leftover]:
    found: list[Leftover] = []
    for record in await workspace.list_datasets():
        if record.head is None:
            continue
        dataset = workspace.open_dataset(record.id)
        names: set[str] = set()
        async for _, block in dataset.chain.iter_blocks():
            event = block.event
            if isinstance(event, (AddData, ExecuteTransform)):
                for item in (event.new_data, event.new_checkpoint):
                    if item is not None:
                        names.add(object_name(item.physical_hash))
        layout = workspace.layout.dataset(record.id)
        for folder, kind in (
            (layout.data_dir, "data file"),
            (layout.checkpoints_dir, "checkpoint"),
        ):
            found += await asyncio.to_thread(
                _old_entries,
                folder,
                f"unreferenced {kind}",
                grace,
                functools.partial(_unreferenced, frozenset(names)),
            )
    return found


def _unreferenced(names: frozenset[str], path: Path) -> bool:
    return path.name not in names and not path.name.startswith(".")


async def staging_files(workspace: Workspace, grace: float) -> list[Leftover]:
    def staged(path: Path) -> bool:
        return path.name.startswith(STAGING_PREFIX)

    found = await asyncio.to_thread(
        _old_entries, workspace.layout.datasets_dir, "unfinished write", grace, staged
    )
    for record in await workspace.list_datasets():
        layout: DatasetLayout = workspace.layout.dataset(record.id)
        for folder in (
            layout.blocks_dir,
            layout.data_dir,
            layout.checkpoints_dir,
            layout.refs_dir,
            layout.info_dir,
        ):
            found += await asyncio.to_thread(
                _old_entries, folder, "unfinished write", grace, staged
            )
    return found


async def staging_folders(workspace: Workspace) -> list[Leftover]:
    """Staging folders no process holds (``storage.scratch``): those of dead processes (opening
    the workspace already removed them) and first pulls' ``datasets/.pull-*`` folders."""
    found = [Leftover("staging of a dead process", path, 0) for path in workspace.swept]
    for path in await asyncio.to_thread(unheld_staging, workspace.layout):
        found.append(Leftover("unheld staging folder", path, await asyncio.to_thread(_size, path)))
    return found


async def remove(leftovers: list[Leftover]) -> None:
    await asyncio.to_thread(_remove_all, leftovers)


def _old_entries(
    folder: Path, kind: str, grace: float, wanted: Callable[[Path], bool]
) -> list[Leftover]:
    if not folder.is_dir():
        return []
    cutoff = time.time() - grace
    found = []
    for path in sorted(folder.iterdir()):
        if not wanted(path):
            continue
        try:
            if _newest_change(path) > cutoff:
                continue
            found.append(Leftover(kind, path, _size(path)))
        except FileNotFoundError:
            continue  # removed meanwhile by whoever owned it
    return found


def _newest_change(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
    return newest


def _size(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return sum(
            os.lstat(os.path.join(root, name)).st_size
            for root, _, files in os.walk(path)
            for name in files
        )
    return path.lstat().st_size


def _remove_all(leftovers: list[Leftover]) -> None:
    for leftover in leftovers:
        if leftover.path.is_dir() and not leftover.path.is_symlink():
            shutil.rmtree(leftover.path, ignore_errors=True)
        else:
            leftover.path.unlink(missing_ok=True)
