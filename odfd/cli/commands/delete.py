"""``odfd delete``: remove datasets from the workspace.

Every name is resolved and every dependency checked before anything is removed, so a typo in the
second name never leaves the first one deleted. Derivative datasets that read a deleted dataset
are deleted with it only with ``--recursive``; the list is shown and confirmed first.
"""

from __future__ import annotations

import argparse

from odfd.cli import console
from odfd.cli.confirm import confirm
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from protocol.identity import DatasetId
from storage.catalog import DatasetRecord
from storage.errors import DatasetNotFoundError, StorageError
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("delete", help="delete datasets (folder, key and catalog entry)")
    parser.add_argument("datasets", nargs="*", metavar="DATASET", help="dataset alias or id")
    parser.add_argument("-a", "--all", action="store_true", help="delete every dataset")
    parser.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="also delete the derivative datasets that read these (and theirs, in all layers)",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_delete)


def _delete(args: argparse.Namespace) -> int:
    if bool(args.datasets) == bool(args.all):
        raise StorageError("name the datasets to delete, or pass --all (not both)")

    async def run(workspace: Workspace) -> int:
        records = await workspace.list_datasets()
        chosen = records if args.all else await _resolve_all(workspace, args.datasets)
        graph = await workspace.graph(records)
        doomed = [*chosen, *graph.downstream_of(chosen)] if args.recursive else chosen
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
            console.info("Nothing to delete")
            return 0
        confirm(args, f"Delete {len(doomed)} dataset(s): {', '.join(r.alias for r in doomed)}?")
        for record in graph.downstream_first(doomed):
            await workspace.delete_dataset(str(record.id))
            console.info(f"Deleted: {record.alias} ({record.id})")
        return 0

    return run_in_workspace(args, run)


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
