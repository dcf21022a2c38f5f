"""The workspace's datasets: add from manifests (with ``--replace``'s all-or-nothing batch),
delete (with the derivatives that read them), rename, import a folder, list with details.

Every name is resolved and every dependency checked before anything changes, so a typo or a
failing manifest never leaves half a batch done.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from odfd.app.dataset_rows import dataset_row
from odfd.app.events import Confirm, Event, EventSink
from odfd.app.write_log import Actor, local_actor, record_write
from odfd.errors import ManifestError
from protocol.identity import AccountName, DatasetAlias, DatasetId, DatasetRef
from protocol.model import AddData, DatasetSnapshot, ExecuteTransform, SetTransform
from storage.errors import (
    DatasetExistsError,
    DatasetNotFoundError,
    InvalidSnapshotError,
    StorageError,
)
from storage.snapshots import check_snapshot, dependency_order, normalize_snapshot

if TYPE_CHECKING:
    from pathlib import Path

    from odfd.app.node import Node
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


# --- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasetAdded(Event):
    name: ClassVar[str] = "datasetAdded"
    alias: str
    dataset_id: str


@dataclass(frozen=True, slots=True)
class DatasetSkipped(Event):
    name: ClassVar[str] = "datasetSkipped"
    alias: str
    reason: str


@dataclass(frozen=True, slots=True)
class DatasetNotAdded(Event):
    """One manifest of a plain add failed; the others were added."""

    name: ClassVar[str] = "datasetNotAdded"
    alias: str
    error: str


@dataclass(frozen=True, slots=True)
class DatasetDeleted(Event):
    name: ClassVar[str] = "datasetDeleted"
    alias: str
    dataset_id: str


@dataclass(frozen=True, slots=True)
class AddResult:
    failed: int
    """Manifests of a plain add that could not be added (the command then exits 1)."""


# --- add ------------------------------------------------------------------------------------------


def renamed_snapshots(
    snapshots: list[DatasetSnapshot], *, name: str | None, account: str | None
) -> list[DatasetSnapshot]:
    """``--name`` (one manifest only) and ``--account`` (for aliases without one) applied, every
    manifest checked: a batch with an invalid manifest adds nothing."""
    if name is not None:
        if len(snapshots) != 1:
            raise ManifestError("--name can only be used when adding a single manifest")
        snapshots = [_renamed(snapshots[0], DatasetAlias.parse(name))]
    if account is not None:
        owner = AccountName.parse(account)
        snapshots = [
            s
            if s.name.account_name is not None
            else _renamed(s, DatasetAlias(owner, s.name.dataset_name))
            for s in snapshots
        ]
    for snapshot in snapshots:
        try:
            check_snapshot(snapshot)
        except InvalidSnapshotError as error:
            raise ManifestError(f"Failed to add dataset {snapshot.name}: {error}") from None
    return snapshots


async def add_datasets(
    node: Node,
    snapshots: list[DatasetSnapshot],
    *,
    replace: bool,
    confirm: Confirm,
    sink: EventSink,
    actor: Actor | None = None,
) -> AddResult:
    """Creates a dataset per manifest, dependencies first, each recorded as done by ``actor``
    (default: a local command). A name that exists is skipped, or, with ``replace``, the batch
    replaces it all or nothing (see :func:`_replace`)."""
    workspace = node.workspace
    if replace and await _replace(workspace, snapshots, confirm, sink, actor or local_actor()):
        return AddResult(0)
    failed = 0
    for snapshot in _in_order(snapshots):
        try:
            dataset = await workspace.create_from_snapshot(snapshot)
        except DatasetExistsError:
            sink.emit(DatasetSkipped(str(snapshot.name), "already exists"))
            continue
        except StorageError as error:
            failed += 1
            sink.emit(DatasetNotAdded(str(snapshot.name), str(error)))
            continue
        await record_write(
            workspace,
            actor or local_actor(),
            "add",
            str(snapshot.name),
            dataset_id=dataset.id,
            new_head=await dataset.chain.head(),
        )
        sink.emit(DatasetAdded(str(snapshot.name), str(dataset.id)))
    return AddResult(failed)


async def _replace(
    workspace: Workspace,
    snapshots: list[DatasetSnapshot],
    confirm: Confirm,
    sink: EventSink,
    actor: Actor,
) -> bool:
    """Replaces the existing datasets the batch names again; ``False`` when it names none (a
    plain add then). The whole batch is created first under staging names, so a manifest that
    fails leaves every old dataset as it was; only then are the old ones deleted (readers
    first) and the new ones renamed into place. Refused, changing nothing, while a dataset the
    batch does not replace reads one it does (it would be left reading a dataset that is gone)."""
    records = await workspace.list_datasets()
    by_name = {r.alias.lower(): r for r in records}
    wanted = {str(s.name).lower() for s in snapshots}
    doomed = [by_name[name] for name in sorted(wanted) if name in by_name]
    if not doomed:
        return False
    await _check_inputs(workspace, snapshots, wanted)
    graph = await workspace.graph(records)
    blocked = graph.blocked_by_readers(doomed)
    if blocked:
        raise StorageError(
            "; ".join(
                f"cannot replace {alias}: it is an input of {', '.join(names)}"
                for alias, names in blocked.items()
            )
            + " (replace or delete those too); nothing was changed"
        )
    confirm(f"Replace {len(doomed)} dataset(s): {', '.join(r.alias for r in doomed)}?")
    staged = await _stage(workspace, snapshots, sink)
    for record in graph.downstream_first(doomed):
        await workspace.delete_dataset(str(record.id))
        await record_write(
            workspace, actor, "delete", record.alias, dataset_id=record.id, old_head=record.head
        )
        sink.emit(DatasetDeleted(record.alias, str(record.id)))
    for snapshot, dataset_id in staged:
        await workspace.rename_dataset(str(dataset_id), snapshot.name)
        await record_write(
            workspace,
            actor,
            "add",
            str(snapshot.name),
            dataset_id=dataset_id,
            new_head=await workspace.open_dataset(dataset_id).chain.head(),
        )
        sink.emit(DatasetAdded(str(snapshot.name), str(dataset_id)))
    return True


async def _stage(
    workspace: Workspace, snapshots: list[DatasetSnapshot], sink: EventSink
) -> list[tuple[DatasetSnapshot, DatasetId]]:
    """Creates the batch under staging names, inputs in the batch resolved to their new
    datasets; on any failure removes what it created and raises, naming the manifest."""
    new_ids: dict[str, DatasetId] = {}
    staged: list[tuple[DatasetSnapshot, DatasetId]] = []

    async def resolve(ref: DatasetRef) -> DatasetId | None:
        if ref.alias is not None and str(ref.alias).lower() in new_ids:
            return new_ids[str(ref.alias).lower()]
        record = await workspace.try_resolve(ref)
        return None if record is None else record.id

    try:
        for snapshot in _in_order(snapshots):
            key = str(snapshot.name).lower()
            if key in new_ids:
                sink.emit(DatasetSkipped(str(snapshot.name), "named twice in the manifests"))
                continue
            try:
                events = await normalize_snapshot(snapshot, resolve)
                dataset = await workspace.create_dataset(
                    f"{snapshot.name}-replacing-{uuid.uuid4().hex[:8]}", snapshot.kind, events
                )
            except StorageError as error:
                raise StorageError(
                    f"cannot replace {snapshot.name}: {error}; nothing was changed"
                ) from None
            assert dataset.id is not None  # created datasets have their id
            new_ids[key] = dataset.id
            staged.append((snapshot, dataset.id))
    except BaseException:
        for _, dataset_id in reversed(staged):
            await workspace.delete_dataset(str(dataset_id))
        raise
    return staged


async def _check_inputs(
    workspace: Workspace, snapshots: list[DatasetSnapshot], batch: set[str]
) -> None:
    """Every input a transform of the batch reads exists here or comes with the batch: otherwise
    its add would fail after the dataset it replaces was already deleted."""
    for snapshot in snapshots:
        for event in snapshot.metadata:
            if not isinstance(event, SetTransform):
                continue
            for entry in event.inputs:
                ref = entry.dataset_ref
                if ref.alias is not None and str(ref.alias).lower() in batch:
                    continue
                if await workspace.try_resolve(ref) is None:
                    raise StorageError(
                        f"cannot replace {snapshot.name}: its input {ref} is neither in the "
                        "workspace nor in the manifests; nothing was changed"
                    )


def _in_order(snapshots: list[DatasetSnapshot]) -> list[DatasetSnapshot]:
    """Dependencies first; a later manifest naming a dataset again comes after, to be reported
    as already existing rather than dropped."""
    first: dict[str, DatasetSnapshot] = {}
    again: list[DatasetSnapshot] = []
    for snapshot in snapshots:
        key = str(snapshot.name).lower()
        if key in first:
            again.append(snapshot)
        else:
            first[key] = snapshot
    return [*dependency_order(list(first.values())), *again]


def _renamed(snapshot: DatasetSnapshot, alias: DatasetAlias) -> DatasetSnapshot:
    return dataclasses.replace(snapshot, name=alias)


# --- delete ---------------------------------------------------------------------------------------


async def delete_datasets(
    node: Node,
    refs: list[str] | None,
    *,
    recursive: bool,
    confirm: Confirm,
    sink: EventSink,
    actor: Actor | None = None,
) -> int:
    """Deletes the named datasets (``None``: every one) and, with ``recursive``, the derivatives
    reading them in all layers, readers first, each recorded as done by ``actor`` (default: a
    local command); the number deleted. Refused, deleting nothing,
    when a dataset left behind would read a deleted one."""
    workspace = node.workspace
    records = await workspace.list_datasets()
    chosen = records if refs is None else await _resolve_all(workspace, refs)
    graph = await workspace.graph(records)
    doomed = [*chosen, *graph.downstream_of(chosen)] if recursive else chosen
    blocked = graph.blocked_by_readers(doomed)
    if blocked:
        raise StorageError(
            "; ".join(
                f"dataset {alias} is an input of {', '.join(names)}"
                for alias, names in blocked.items()
            )
            + " (delete those too with --recursive); nothing was deleted"
        )
    if not doomed:
        return 0
    confirm(f"Delete {len(doomed)} dataset(s): {', '.join(r.alias for r in doomed)}?")
    for record in graph.downstream_first(doomed):
        await _delete_one(workspace, record, actor or local_actor())
        sink.emit(DatasetDeleted(record.alias, str(record.id)))
    return len(doomed)


async def _delete_one(workspace: Workspace, record: DatasetRecord, actor: Actor) -> None:
    """Deletes one dataset and, in the same catalog transaction, every resource entry naming
    its alias (:mod:`odfd.app.resource_datasets`), so a dataset later created under that alias
    inherits no role or visibility of this one."""
    from odfd.app.resource_datasets import follow_dataset

    async with workspace.catalog.transaction():
        # The resources first: a failure there rolls back before any file is removed.
        await follow_dataset(workspace, actor, record.alias, None)
        await workspace.delete_dataset(str(record.id))
        await record_write(
            workspace, actor, "delete", record.alias, dataset_id=record.id, old_head=record.head
        )


async def _resolve_all(workspace: Workspace, refs: list[str]) -> list[DatasetRecord]:
    found: dict[DatasetId, DatasetRecord] = {}
    missing = []
    for ref in refs:
        record = await workspace.try_resolve(ref)
        if record is None:
            missing.append(ref)
        else:
            found.setdefault(record.id, record)
    if missing:
        raise DatasetNotFoundError(
            f"no dataset {', '.join(missing)} in the workspace {workspace.root}; nothing was deleted"
        )
    return list(found.values())


# --- rename, import, list ---------------------------------------------------------------------------


async def rename_dataset(
    node: Node, ref: str, new_name: str, *, actor: Actor | None = None
) -> DatasetRecord:
    """A dataset's new alias (its id and chain do not change), recorded as done by ``actor``
    (default: a local command). Every resource naming the old alias is rewritten to the new one
    in the same catalog transaction (:mod:`odfd.app.resource_datasets`): a crash never leaves
    the dataset renamed and its roles and visibility behind."""
    from odfd.app.resource_datasets import follow_dataset

    workspace = node.workspace
    before = await workspace.resolve(ref)
    who = actor or local_actor()
    try:
        async with workspace.catalog.transaction():
            record = await workspace.rename_dataset(str(before.id), new_name)
            if record.alias != before.alias:
                await follow_dataset(workspace, who, before.alias, record.alias)
                await record_write(workspace, who, "rename", record.alias, dataset_id=record.id)
    except BaseException:
        # The catalog kept the old alias: so does the dataset's own copy of it.
        await workspace.open_dataset(before.id).set_alias(before.alias)
        raise
    return record


async def import_dataset(node: Node, path: Path, name: str | None) -> DatasetRecord:
    """Copies a dataset folder (e.g. written by kamu) in after validating its chain."""
    dataset = await node.workspace.import_dataset(path, name)
    return await node.workspace.resolve(str(dataset.id))


async def list_datasets(node: Node, *, wide: bool) -> list[dict[str, Any]]:
    """Every dataset's row; ``wide`` adds records, data size and watermark (reads each chain)."""
    workspace = node.workspace
    rows = []
    for record in await workspace.list_datasets():
        row = dataset_row(record)
        if wide:
            row.update(await _details(workspace, record))
        rows.append(row)
    return rows


async def _details(workspace: Workspace, record: DatasetRecord) -> dict[str, Any]:
    dataset = workspace.open_dataset(record.id)
    state = await dataset.chain.state()
    size = 0
    async for _, block in dataset.chain.iter_blocks():
        event = block.event
        if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
            size += event.new_data.size
    watermark = state.last_watermark
    return {
        "records": 0 if state.last_offset is None else state.last_offset + 1,
        "size": size,
        "watermark": None if watermark is None else watermark.to_rfc3339(),
    }
