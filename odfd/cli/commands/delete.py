"""``odfd delete``: remove datasets from the workspace, or resources (``odfd delete
SecretSet:my-secrets``, ``odfd delete -f manifests/``: those the manifests declare).

Every name is resolved and every dependency checked before anything is removed, so a typo in the
second name never leaves the first one deleted. Derivative datasets that read a deleted dataset
are deleted with it only with ``--recursive``; the list is shown and confirmed first.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.confirm import confirmer
from odfd.cli.workspace_args import add_root_argument, run_in_node
from storage.errors import StorageError

if TYPE_CHECKING:
    from odfd.app.events import Event
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "delete", help="delete datasets (folder, key and catalog entry) or resources"
    )
    parser.add_argument(
        "datasets",
        nargs="*",
        metavar="DATASET|Type:NAME",
        help="dataset alias or id; or a resource as Type:[account/]name (e.g. Flow:nightly)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="paths",
        action="append",
        type=Path,
        default=[],
        metavar="FILE|DIR",
        help="delete the resources these manifests declare (repeatable)",
    )
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
    from odfd.app.datasets import delete_datasets

    resources = [name for name in args.datasets if ":" in name]
    if args.paths or resources:
        if len(resources) != len(args.datasets) or args.all:
            raise StorageError("delete resources or datasets, not both in one command")
        return _delete_resources(args, resources)
    if bool(args.datasets) == bool(args.all):
        raise StorageError("name the datasets to delete, or pass --all (not both)")

    async def run(node: Node) -> int:
        deleted = await delete_datasets(
            node,
            None if args.all else args.datasets,
            recursive=args.recursive,
            confirm=confirmer(args),
            sink=_Printer(),
        )
        if not deleted:
            terminal.info("Nothing to delete")
        return 0

    return run_in_node(args, run)


def _delete_resources(args: argparse.Namespace, names: list[str]) -> int:
    from odfd.app.resource_service import delete_and_undo
    from odfd.app.resources import ResourceKey, load_manifests

    keys = [ResourceKey.parse(name) for name in names]
    keys += [ResourceKey(m.schema, m.name) for m in load_manifests(args.paths)]

    async def run(node: Node) -> int:
        for deleted in await delete_and_undo(node, keys):
            record = deleted.record
            terminal.info(f"Deleted: {ResourceKey(record.schema, record.name)} ({record.id})")
            if deleted.unsubscribed is not None and deleted.unsubscribed.error is None:
                terminal.info(f"  {deleted.unsubscribed}")
            elif deleted.unsubscribed is not None:
                terminal.warn(str(deleted.unsubscribed))
        return 0

    return run_in_node(args, run)


class _Printer:
    def emit(self, event: Event) -> None:
        from odfd.app.datasets import DatasetDeleted

        if isinstance(event, DatasetDeleted):
            terminal.info(f"Deleted: {event.alias} ({event.dataset_id})")
