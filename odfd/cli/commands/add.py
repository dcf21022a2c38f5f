"""``odfd add``: create datasets from DatasetSnapshot manifests (one or many documents a file)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import uuid

from odfd.cli import console
from odfd.cli.confirm import confirm
from odfd.cli.manifest_source import ManifestError, read_manifests
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from protocol.codec import yaml as odf_yaml
from protocol.identity import AccountName, DatasetAlias, DatasetId, DatasetRef
from protocol.model import DatasetSnapshot, SetTransform
from storage.errors import DatasetExistsError, InvalidSnapshotError, StorageError
from storage.snapshots import check_snapshot, dependency_order, normalize_snapshot
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("add", help="create datasets from DatasetSnapshot manifests")
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE|URL",
        help="YAML manifest(s): files, folders (every *.yaml holding a DatasetSnapshot) "
        "or http(s):// URLs",
    )
    parser.add_argument(
        "--stdin", action="store_true", help="also read manifests from standard input"
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="replace an existing dataset of the same name (asks unless -y; the new one is "
        "created first, so a failing manifest changes nothing; refused while another dataset "
        "reads it)",
    )
    parser.add_argument("--name", help="alias for the dataset (only with a single manifest)")
    parser.add_argument(
        "--account", help="prefix aliases without an account with this account name"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_add)


def _add(args: argparse.Namespace) -> int:
    if not args.files and not args.stdin:
        raise ManifestError("name manifest files, folders or URLs, or pass --stdin")
    snapshots: list[DatasetSnapshot] = []
    for manifest in read_manifests(args.files, stdin=args.stdin):
        loaded = odf_yaml.load_snapshots(manifest.text, source=manifest.source)
        if not loaded:
            raise ManifestError(
                f"{manifest.source}: holds no DatasetSnapshot (it is empty or only comments)"
            )
        snapshots.extend(loaded)
    if args.name is not None:
        if len(snapshots) != 1:
            raise ManifestError("--name can only be used when adding a single manifest")
        snapshots = [_renamed(snapshots[0], DatasetAlias.parse(args.name))]
    if args.account is not None:
        account = AccountName.parse(args.account)
        snapshots = [
            s
            if s.name.account_name is not None
            else _renamed(s, DatasetAlias(account, s.name.dataset_name))
            for s in snapshots
        ]

    for snapshot in snapshots:  # a batch with an invalid manifest adds nothing
        try:
            check_snapshot(snapshot)
        except InvalidSnapshotError as error:
            raise ManifestError(f"Failed to add dataset {snapshot.name}: {error}") from None

    async def run(workspace: Workspace) -> int:
        if args.replace and await _replace(args, workspace, snapshots):
            return 0
        failures = 0
        for snapshot in _in_order(snapshots):
            try:
                dataset = await workspace.create_from_snapshot(snapshot)
            except DatasetExistsError:
                console.info(f"Skipped: {snapshot.name}: already exists")
                continue
            except StorageError as error:
                failures += 1
                print(f"Failed: {snapshot.name}: {error}", file=sys.stderr)
                continue
            console.info(f"Added: {snapshot.name} ({dataset.id})")
        return 1 if failures else 0

    return run_in_workspace(args, run)


async def _replace(
    args: argparse.Namespace, workspace: Workspace, snapshots: list[DatasetSnapshot]
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
    confirm(args, f"Replace {len(doomed)} dataset(s): {', '.join(r.alias for r in doomed)}?")
    staged = await _stage(workspace, snapshots)
    for record in graph.downstream_first(doomed):
        await workspace.delete_dataset(str(record.id))
        console.info(f"Deleted: {record.alias} ({record.id})")
    for snapshot, dataset_id in staged:
        await workspace.rename_dataset(str(dataset_id), snapshot.name)
        console.info(f"Added: {snapshot.name} ({dataset_id})")
    return True


async def _stage(
    workspace: Workspace, snapshots: list[DatasetSnapshot]
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
                console.info(f"Skipped: {snapshot.name}: named twice in the manifests")
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
