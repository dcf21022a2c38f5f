"""Repairs after a crash (``SIGKILL``, power loss). ``settle_orphans`` is what every command
settles as it opens the workspace, in the CLI and in the daemon alike (``storage.orphans``).
``recover_workspace`` is the use case the daemon runs as it starts — cheap, and only what a crash
can leave behind, since every commit moves ``refs/head`` last:

* a dataset folder renamed into place whose catalog row was never written (a first pull killed
  between the rename and the insert): validated and registered, as ``odfd repair`` would;
* a catalog head behind ``refs/head`` (killed after the head moved, before the catalog heard);
* a new dataset's staging folder (``datasets/.pull-*``) whose head was set but which was never
  renamed into place: its ``refs/head`` is dropped so the next pull commits it again (the blocks
  and objects stay, so nothing is fetched twice).
"""

from __future__ import annotations

import logging

from protocol.errors import ParseError
from protocol.identity import DatasetId
from storage.layout import HEAD_REF
from storage.orphans import recover_folder, recover_orphans
from storage.scratch import PULL_PREFIX
from storage.workspace import Workspace

log = logging.getLogger(__name__)


async def settle_orphans(workspace: Workspace) -> list[str]:
    """Settles the dataset folders the catalog does not know (a process killed between putting a
    folder in place and writing its row): adopted, removed or left, one line each."""
    return [action.describe() for action in await recover_orphans(workspace)]


async def recover_workspace(workspace: Workspace) -> list[str]:
    """Bring the catalog in step with the dataset folders; returns what was fixed."""
    fixed: list[str] = []
    known = {record.id: record for record in await workspace.list_datasets()}
    for record in known.values():
        dataset = workspace.open_dataset(record.id)
        head = await dataset.chain.head()
        if head is not None and head != record.head:
            block = await dataset.chain.get_block(head)
            await workspace.catalog.update_head(record.id, head, block.sequence_number)
            fixed.append(
                f"{record.alias}: catalog head updated to {head} (#{block.sequence_number})"
            )
    folder = workspace.layout.datasets_dir
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.name.startswith(PULL_PREFIX) and (path / "refs" / HEAD_REF).is_file():
            (path / "refs" / HEAD_REF).unlink()
            fixed.append(f"{path.name}: unfinished first pull will commit again")
            continue
        if path.name.startswith(".") or not path.is_dir():
            continue
        try:
            dataset_id = DatasetId.from_multibase(path.name)
        except ParseError:
            continue
        if dataset_id in known:
            continue
        message = await _adopt(workspace, dataset_id)
        if message:
            fixed.append(message)
    for message in fixed:
        log.warning("recovered after an interrupted run", extra={"fix": message})
    return fixed


async def _adopt(workspace: Workspace, dataset_id: DatasetId) -> str | None:
    action = await recover_folder(workspace, dataset_id, remove_incomplete=False)
    if action is None:
        return None  # being put in place by another process, or in the catalog by now
    if action.record is None:
        if action.detail != f"no refs/{HEAD_REF}":  # an unfinished create or delete: ignored
            log.warning(
                "dataset folder left alone",
                extra={"folder": dataset_id.to_multibase(), "reason": action.detail},
            )
        return None
    return f"{action.record.alias}: registered dataset folder {dataset_id.to_multibase()}"
