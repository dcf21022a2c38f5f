"""The local side of a pull: which dataset receives the blocks, and committing them there.

An existing dataset receives blocks and objects in its own folder (invisible until ``head``
moves). A dataset new to the workspace is assembled in ``datasets/.pull-<key>/`` (a dot folder
every listing skips, named after the remote so an interrupted first pull resumes into it) and
renamed into place once its head is set; only then does the catalog learn of it.

Committing checks the chain rules over the new blocks and that every object they name is
stored with its size, then moves ``head`` by compare-and-swap; ``--force`` replaces a diverged
local history the same way, from the last shared block, or moves ``head`` back to the source's
when the target is ahead of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from odfd.sync.errors import ChainPoint, SyncError
from odfd.sync.walk import WalkResult
from protocol.identity import DatasetAlias, DatasetId, DatasetName, Multihash
from protocol.model import Seed
from storage.catalog import DatasetRecord
from storage.chain.metadata_chain import check_block_objects
from storage.chain.rules import ChainState
from storage.dataset import Dataset, RemoteAliasKind
from storage.errors import ChainRuleError, DatasetExistsError, StorageError
from storage.layout import HEAD_REF, DatasetLayout
from storage.orphans import recover_folder
from storage.scratch import PULL_PREFIX, try_lock_folder
from storage.workspace import Workspace

STAGING_PREFIX = PULL_PREFIX


@dataclass(slots=True)
class PullTarget:
    workspace: Workspace
    alias: str
    dataset: Dataset
    record: DatasetRecord | None
    """``None`` while the dataset is new to the workspace."""
    head: ChainPoint
    lock_fd: int | None = None
    recovered: list[str] = field(default_factory=list)
    """What was found on disk and put right on the way (``storage.orphans``)."""
    """Held ``flock`` on a new dataset's staging folder: one pull per folder, and ``odfd system
    gc`` leaves it alone while the pull runs."""

    @property
    def is_new(self) -> bool:
        return self.record is None


def staging_dir(workspace: Workspace, url: str) -> Path:
    key = hashlib.sha256(url.encode()).hexdigest()[:24]
    return workspace.layout.datasets_dir / f"{STAGING_PREFIX}{key}"


async def find_by_remote(workspace: Workspace, url: str) -> DatasetRecord | None:
    """The dataset whose pull remotes include ``url``."""
    for record in await workspace.list_datasets():
        if url in await workspace.catalog.remote_aliases(record.id, "pull"):
            return record
    return None


async def open_target(
    workspace: Workspace, url: str, alias: str | None, default_name: DatasetName | None
) -> PullTarget:
    """The dataset a pull from ``url`` goes into: ``alias``, else the one pulled from there
    before, else a new one named ``default_name``."""
    record = None
    if alias is not None:
        alias = str(DatasetAlias.parse(alias))
        record = await workspace.catalog.find_by_alias(alias)
    else:
        record = await find_by_remote(workspace, url)
        if record is None:
            if default_name is None:
                raise SyncError(
                    f"cannot name the dataset pulled from {url}: give one with --as ALIAS"
                )
            alias = str(default_name)
            record = await workspace.catalog.find_by_alias(alias)
    if record is not None:
        dataset = workspace.open_dataset(record.id)
        head = await dataset.chain.head()
        seq = (await dataset.chain.get_block(head)).sequence_number if head is not None else None
        return PullTarget(workspace, record.alias, dataset, record, ChainPoint(head, seq))
    assert alias is not None  # set above when no record was found
    layout = DatasetLayout(staging_dir(workspace, url)).create()
    lock_fd = try_lock_folder(layout.root)
    if lock_fd is None:
        raise SyncError(f"another pull from {url} into {workspace.root} is running")
    dataset = Dataset.open_local(layout.root, staging=workspace.scratch.folder)
    return PullTarget(workspace, alias, dataset, None, ChainPoint(None, None), lock_fd)


def release_target(target: PullTarget) -> None:
    """Let go of a new dataset's staging folder (the pull is over)."""
    if target.lock_fd is not None:
        os.close(target.lock_fd)
        target.lock_fd = None


def check_same_dataset(target: PullTarget, walk: WalkResult, where: str) -> None:
    """A walk that reached the remote's seed must be of the dataset the target holds."""
    remote_id = walk.dataset_id
    if target.record is not None and remote_id is not None and remote_id != target.record.id:
        raise SyncError(
            f"{where} holds dataset {remote_id}, but local {target.alias} is {target.record.id}: "
            "they are different datasets (pull into a new alias with --as)"
        )


async def commit(
    target: PullTarget, walk: WalkResult, *, force: bool, stored_checked: bool = False
) -> tuple[Multihash, int]:
    """Make the walked blocks the target's history; returns the new head and its sequence number.
    ``stored_checked``: the caller re-read every new block's stored file (``check_stored``)."""
    hashes = [item.hash for item in walk.new_blocks]
    if not hashes:
        if force and needs_reset(target, walk):
            return await _reset_head(target, walk.remote)
        raise StorageError("nothing to commit")
    if target.record is None:
        return await _commit_new(target, walk, stored_checked)
    if walk.diverged:
        if not force:
            raise StorageError("refusing to replace a diverged history without force")
        return await _replace_history(target, walk)
    head = await target.dataset.chain.append_stored(
        hashes, [item.block for item in walk.new_blocks], stored_checked=stored_checked
    )
    return head, walk.new_blocks[-1].block.sequence_number


def needs_reset(target: PullTarget, walk: WalkResult) -> bool:
    """The source's head is an older block of the target's own history: with ``--force`` the
    target goes back to it (``--force`` makes the target equal to the source, as the reference
    does)."""
    return (
        target.record is not None
        and not walk.new_blocks
        and walk.remote.hash is not None
        and walk.remote.hash != target.head.hash
        and walk.common is not None
        and walk.common.hash == walk.remote.hash
    )


async def _reset_head(target: PullTarget, point: ChainPoint) -> tuple[Multihash, int]:
    """Moves ``head`` back to ``point``, a block of the target's history (compare-and-swap)."""
    dataset = target.dataset
    assert point.hash is not None
    block = await dataset.chain.get_block(point.hash)
    await dataset.refs.set(HEAD_REF, point.hash, expected=target.head.hash)
    if dataset.chain.on_head_moved is not None:
        await dataset.chain.on_head_moved(point.hash, block.sequence_number)
    return point.hash, block.sequence_number


async def _replace_history(target: PullTarget, walk: WalkResult) -> tuple[Multihash, int]:
    dataset = target.dataset
    common = walk.common.hash if walk.common is not None else None
    if common is None:
        raise SyncError(
            f"refusing to replace {target.alias}'s seed: the remote is a different dataset"
        )
    state: ChainState = await dataset.chain.state(common, use_current_head=False)
    for item in walk.new_blocks:
        state.apply(item.hash, item.block)
        await check_block_objects(item.hash, item.block, dataset.data, dataset.checkpoints)
    new_head = walk.new_blocks[-1].hash
    await dataset.refs.set(HEAD_REF, new_head, expected=target.head.hash)
    if dataset.chain.on_head_moved is not None:
        await dataset.chain.on_head_moved(new_head, state.sequence_number)
    return new_head, state.sequence_number


async def _commit_new(
    target: PullTarget, walk: WalkResult, stored_checked: bool
) -> tuple[Multihash, int]:
    first = walk.new_blocks[0].block
    if not isinstance(first.event, Seed) or walk.common is not None:
        raise ChainRuleError(
            "seed-first",
            "a new dataset's history must start with its Seed",
            sequence_number=first.sequence_number,
            block_hash=walk.new_blocks[0].hash,
        )
    dataset_id: DatasetId = first.event.dataset_id
    workspace = target.workspace
    if (existing := await workspace.catalog.get_dataset(dataset_id)) is not None:
        raise DatasetExistsError(
            f"dataset {dataset_id} is already in the workspace as {existing.alias}; "
            f"pull into it with --as {existing.alias}"
        )
    if await workspace.catalog.find_by_alias(target.alias) is not None:
        raise DatasetExistsError(f"dataset {target.alias} already exists in {workspace.root}")
    assert target.dataset.layout is not None  # staged datasets are local folders
    staging = target.dataset.layout.root
    staged = Dataset.open_local(
        staging, dataset_id, saved_states=workspace.chain_states, staging=workspace.scratch.folder
    )
    head = await staged.chain.append_stored(
        [item.hash for item in walk.new_blocks],
        [item.block for item in walk.new_blocks],
        stored_checked=stored_checked,
    )
    await staged.set_alias(target.alias)
    if await workspace.storage.exists(dataset_id):
        # Left by a pull killed between the rename and the catalog: settle it now.
        action = await recover_folder(workspace, dataset_id)
        if action is None:
            if (existing := await workspace.catalog.get_dataset(dataset_id)) is not None:
                raise DatasetExistsError(
                    f"dataset {dataset_id} is already in the workspace as {existing.alias}; "
                    f"pull into it with --as {existing.alias}"
                )
            raise SyncError(
                f"another process is putting dataset {dataset_id} in place in "
                f"{workspace.root}; pull again when it is done"
            )
        target.recovered.append(action.describe())
        if action.record is not None and action.record.head == head:
            await discard_staging(target)  # the folder on disk is this very pull's result
            target.record = action.record
            target.dataset = workspace.open_dataset(dataset_id)
            return head, walk.new_blocks[-1].block.sequence_number
        if action.action == "adopted":
            raise SyncError(f"{action.describe()}; pull again to bring it up to date")
        if action.action == "left":
            raise DatasetExistsError(f"{action.describe()} (run `odfd repair` to see why)")
    await workspace.storage.adopt(DatasetLayout(staging), dataset_id)
    seq = walk.new_blocks[-1].block.sequence_number
    state_kind = first.event.dataset_kind
    target.record = await workspace.catalog.add_dataset(
        dataset_id, target.alias, state_kind, head, seq
    )
    await workspace.index_inputs(dataset_id, await staged.chain.state(head, use_current_head=False))
    target.dataset = workspace.open_dataset(dataset_id)
    return head, seq


async def remember_remote(target: PullTarget, url: str, kind: RemoteAliasKind = "pull") -> None:
    """Record ``url`` among the dataset's pull (or push) remotes, in ``info/config`` and the
    catalog, so ``odfd pull DATASET`` syncs from it later."""
    assert target.record is not None  # only committed datasets have remotes
    aliases = await target.dataset.remote_aliases()
    refs = aliases[kind]
    if url not in refs:
        refs = [*refs, url]
        await target.dataset.set_remote_aliases(kind, refs)
        await target.workspace.catalog.set_remote_aliases(target.record.id, kind, refs)


async def discard_staging(target: PullTarget) -> None:
    """Remove a new dataset's staging folder (after its source proved untrustworthy, or after a
    push that did not complete), off the event loop."""
    if target.record is None and target.dataset.layout is not None:
        root = target.dataset.layout.root
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, root, ignore_errors=True))


async def discard_staging_if_empty(target: PullTarget) -> None:
    """Remove a new dataset's staging folder unless it holds verified blocks or objects an
    interrupted pull can resume from."""
    layout = target.dataset.layout
    if target.record is None and layout is not None:
        if not await asyncio.to_thread(_holds_objects, layout):
            await discard_staging(target)


def _holds_objects(layout: DatasetLayout) -> bool:
    folders = (layout.blocks_dir, layout.data_dir, layout.checkpoints_dir)
    return any(
        not entry.name.startswith(".")
        for folder in folders
        if folder.is_dir()
        for entry in os.scandir(folder)
    )
