"""``odfd add``: create datasets from DatasetSnapshot manifests (one or many documents a file)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from odfd.cli import console
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.errors import OdfdError
from protocol.codec import yaml as odf_yaml
from protocol.identity import AccountName, DatasetAlias
from protocol.model import DatasetSnapshot
from storage.errors import DatasetExistsError, InvalidSnapshotError, StorageError
from storage.snapshots import check_snapshot, dependency_order
from storage.workspace import Workspace


class ManifestError(OdfdError):
    """A manifest file cannot be read."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("add", help="create datasets from DatasetSnapshot manifests")
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="YAML manifest(s); a folder adds every *.yaml holding a DatasetSnapshot",
    )
    parser.add_argument("--name", help="alias for the dataset (only with a single manifest)")
    parser.add_argument(
        "--account", help="prefix aliases without an account with this account name"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_add)


def _add(args: argparse.Namespace) -> int:
    snapshots: list[DatasetSnapshot] = []
    for path in _manifest_files(args.files):
        try:
            text = path.read_bytes()
        except OSError as error:
            raise ManifestError(f"cannot read {path}: {error.strerror or error}") from None
        loaded = odf_yaml.load_snapshots(text, source=str(path))
        if not loaded:
            raise ManifestError(f"{path}: holds no DatasetSnapshot (it is empty or only comments)")
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


def _manifest_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = [p for p in sorted(path.rglob("*.yaml")) if _is_snapshot(p)]
            if not found:
                raise ManifestError(f"{path}: no *.yaml file in it holds a DatasetSnapshot")
            files.extend(found)
        else:
            files.append(path)
    return files


def _is_snapshot(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return False
    return "DatasetSnapshot" in head


def _renamed(snapshot: DatasetSnapshot, alias: DatasetAlias) -> DatasetSnapshot:
    return dataclasses.replace(snapshot, name=alias)
