"""Putting the catalog right from the disk, without a user step.

Dataset folders are the truth; the catalog is an index. A process killed between renaming a
new dataset's folder into place and writing its catalog row leaves a folder with a head that no
command knows about, and one killed while creating a dataset leaves a folder without a head. Each
such *orphan* (a folder named by a dataset id, not in the catalog) is settled here:

* complete and valid (a head, every block hash-checked and every chain rule applied, every
  object present with its size, a free alias in ``info/alias``): **adopted** into the catalog;
* without ``refs/head`` (an unfinished create, pull or delete): **removed**;
* anything else (invalid chain, alias taken): **left** in place, and said why.

Scans skip folders changed in the last ``ORPHAN_MIN_AGE`` seconds, which may belong to a commit
in progress in another process; the pull that is about to commit a dataset settles that one
folder at once.
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
from storage.layout import HEAD_REF, DatasetLayout
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
    """Settle every orphan folder not changed in the last ``min_age`` seconds."""
    folder = workspace.layout.datasets_dir
    if not folder.is_dir():
        return []
    known = {record.id for record in await workspace.list_datasets()}
    actions = []
    now = time.time()
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_dir():
            continue
        try:
            dataset_id = DatasetId.from_multibase(path.name)
        except ParseError:
            continue
        if dataset_id in known or now - _last_change(path) < min_age:
            continue
        actions.append(await recover_folder(workspace, dataset_id))
    return actions


async def recover_folder(
    workspace: Workspace, dataset_id: DatasetId, *, remove_incomplete: bool = True
) -> OrphanAction:
    """Adopt, remove or leave the folder of ``dataset_id`` (which the catalog does not hold)."""
    layout = DatasetLayout(Path(workspace.storage.where(dataset_id)))
    dataset = workspace.storage.open(dataset_id)
    try:
        head = await dataset.chain.head()
    except StorageError as err:
        return OrphanAction(layout.root, "left", f"unreadable refs/{HEAD_REF}: {err}")
    if head is None:
        if not remove_incomplete:
            return OrphanAction(layout.root, "left", f"no refs/{HEAD_REF}")
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
