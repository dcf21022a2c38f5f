"""Putting the catalog right from the disk, without a user step.

Dataset folders are the truth; the catalog is an index. A process killed between renaming a
new dataset's folder into place and writing its catalog row leaves a folder with a head that no
command knows about, and one killed while creating a dataset leaves a folder without a head. Each
such *orphan* (a folder named by a dataset id, not in the catalog) is settled here, by every
command that opens the workspace, so no command sees a dataset another one does not:

* complete and valid (a head, every block hash-checked and every chain rule applied, every
  object present with its size, a free alias in ``info/alias``): **adopted** into the catalog;
* without ``refs/head`` (an unfinished create, pull or delete) and unchanged for ``min_age``
  seconds: **removed** (it is no dataset: no command shows it meanwhile);
* anything else (invalid chain, alias taken): **left** in place, and said why, every time.

A process that puts a dataset folder in place holds the folder's ``flock`` until the catalog
row is written (``storage.scratch.holding_folder``); a folder whose lock is taken is a commit in progress and is
not touched, and the catalog is asked again once the lock is ours.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from protocol.errors import ParseError
from protocol.identity import DatasetAlias, DatasetId
from storage.catalog import DatasetRecord
from storage.chain import validate_chain
from storage.errors import StorageError
from storage.layout import HEAD_REF, DatasetLayout, dataset_dir_name, unknown_dataset_folders
from storage.scratch import try_lock_folder
from storage.workspace import Workspace

ORPHAN_MIN_AGE = 60.0

Action = Literal["adopted", "removed", "left"]


@dataclass(frozen=True, slots=True)
class OrphanAction:
    folder: Path
    action: Action
    detail: str
    record: DatasetRecord | None = None

    def describe(self) -> str:
        return f"{self.action} dataset folder {self.folder.name}: {self.detail}"


async def recover_orphans(
    workspace: Workspace, *, min_age: float = ORPHAN_MIN_AGE
) -> list[OrphanAction]:
    """Settle every orphan folder (see the module docstring; a headless one once it has not
    changed for ``min_age`` seconds)."""
    known = [dataset_dir_name(record.id) for record in await workspace.list_datasets()]
    actions = []
    for path in unknown_dataset_folders(workspace.layout.datasets_dir, known):
        try:
            dataset_id = DatasetId.from_multibase(path.name)
        except ParseError:
            continue
        action = await recover_folder(workspace, dataset_id, headless_min_age=min_age)
        if action is not None:
            actions.append(action)
    return actions


async def recover_folder(
    workspace: Workspace,
    dataset_id: DatasetId,
    *,
    remove_incomplete: bool = True,
    headless_min_age: float = 0.0,
) -> OrphanAction | None:
    """Adopt, remove or leave the folder of ``dataset_id`` (which the catalog did not hold);
    ``None`` when there is nothing to settle: another process is putting it in place (its lock
    is taken), it is in the catalog after all, or it is headless and younger than
    ``headless_min_age`` seconds."""
    layout = DatasetLayout(Path(workspace.storage.where(dataset_id)))
    try:
        fd = try_lock_folder(layout.root)
    except (FileNotFoundError, NotADirectoryError):
        return None  # gone meanwhile (a delete), or not a local folder
    if fd is None:
        return None
    try:
        if await workspace.catalog.get_dataset(dataset_id) is not None:
            return None  # its commit finished while we looked
        return await _settle(workspace, dataset_id, layout, remove_incomplete, headless_min_age)
    finally:
        os.close(fd)


async def _settle(
    workspace: Workspace,
    dataset_id: DatasetId,
    layout: DatasetLayout,
    remove_incomplete: bool,
    headless_min_age: float,
) -> OrphanAction | None:
    dataset = workspace.storage.open(dataset_id)
    try:
        head = await dataset.chain.head()
    except StorageError as err:
        return OrphanAction(layout.root, "left", f"unreadable refs/{HEAD_REF}: {err}")
    if head is None:
        if not remove_incomplete:
            return OrphanAction(layout.root, "left", f"no refs/{HEAD_REF}")
        if time.time() - _last_change(layout.root) < headless_min_age:
            return None
        await workspace.storage.remove(dataset_id)
        return OrphanAction(
            layout.root, "removed", f"no refs/{HEAD_REF} (an unfinished create, pull or delete)"
        )
    try:
        state = await validate_chain(
            dataset.chain,
            head,
            dataset_id=dataset_id,
            data=dataset.data,
            checkpoints=dataset.checkpoints,
        )
        alias_text = await dataset.alias()
        if alias_text is None:
            return OrphanAction(layout.root, "left", "no info/alias; run `odfd repair`")
        alias = str(DatasetAlias.parse(alias_text))
        aliases = await dataset.remote_aliases()
    except (StorageError, ParseError) as err:
        return OrphanAction(layout.root, "left", f"not a valid dataset: {err}")
    taken = await workspace.catalog.find_by_alias(alias)
    if taken is not None:
        return OrphanAction(layout.root, "left", f"its alias {alias} is taken by {taken.id}")
    assert state.kind is not None  # a valid chain starts with a Seed
    record = await workspace.catalog.add_dataset(
        dataset_id, alias, state.kind, head, state.sequence_number
    )
    await workspace.index_inputs(dataset_id, state)
    for kind, refs in aliases.items():
        if refs:
            await workspace.catalog.set_remote_aliases(dataset_id, kind, refs)
    return OrphanAction(
        layout.root,
        "adopted",
        f"a complete, valid dataset not in the catalog, now {alias} at "
        f"{head} (#{state.sequence_number})",
        record,
    )


def _last_change(root: Path) -> float:
    layout = DatasetLayout(root)
    newest = 0.0
    for path in (
        root,
        layout.refs_dir,
        layout.refs_dir / HEAD_REF,
        layout.blocks_dir,
        layout.info_dir,
    ):
        try:
            newest = max(newest, os.stat(path).st_mtime)
        except FileNotFoundError:
            continue
    return newest
