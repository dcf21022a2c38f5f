"""``odfd delete``: remove datasets from the workspace.

Every name is resolved and every dependency checked before anything is removed, so a typo in the
second name never leaves the first one deleted. Derivative datasets that read a deleted dataset
are deleted with it only with ``--recursive``; the list is shown and confirmed first.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.confirm import confirmer
from odfd.cli.workspace_args import add_root_argument, run_in_node
from storage.errors import StorageError

if TYPE_CHECKING:
    from odfd.app.events import Event
    from odfd.app.node import Node


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
    from odfd.app.datasets import delete_datasets

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


class _Printer:
    def emit(self, event: Event) -> None:
        from odfd.app.datasets import DatasetDeleted

        if isinstance(event, DatasetDeleted):
            terminal.info(f"Deleted: {event.alias} ({event.dataset_id})")
