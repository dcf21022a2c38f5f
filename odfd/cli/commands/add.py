"""``odfd add``: create datasets from DatasetSnapshot manifests (one or many documents a file)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from odfd.cli.confirm import confirmer
from odfd.cli.manifest_source import read_manifests
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.errors import ManifestError

if TYPE_CHECKING:
    from odfd.app.events import Event
    from odfd.app.node import Node
    from protocol.model import DatasetSnapshot


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
    from odfd.app.datasets import add_datasets, renamed_snapshots
    from odfd.app.snapshot_manifests import snapshots_in

    if not args.files and not args.stdin:
        raise ManifestError("name manifest files, folders or URLs, or pass --stdin")
    manifests = read_manifests(args.files, stdin=args.stdin)
    snapshots = snapshots_in((manifest.source, manifest.text) for manifest in manifests)
    snapshots = renamed_snapshots(snapshots, name=args.name, account=args.account)
    _warn_of_literal_secrets(snapshots)

    async def run(node: Node) -> int:
        result = await add_datasets(
            node, snapshots, replace=args.replace, confirm=confirmer(args), sink=_Printer()
        )
        return 1 if result.failed else 0

    return run_in_node(args, run)


def _warn_of_literal_secrets(snapshots: list[DatasetSnapshot]) -> None:
    """Before anything is added: one warning for each credential a manifest holds in the clear
    (``odfd.app.manifest_secrets``), which the dataset's public chain would keep."""
    from odfd.app.manifest_secrets import literal_secrets
    from odfd.cli import terminal

    for snapshot in snapshots:
        for secret in literal_secrets(snapshot):
            terminal.warn(secret.message())


class _Printer:
    """The add's events as status lines (a failed manifest is printed even with ``--quiet``)."""

    def emit(self, event: Event) -> None:
        from odfd.app import datasets
        from odfd.cli import terminal

        match event:
            case datasets.DatasetAdded(alias=alias, dataset_id=dataset_id):
                terminal.info(f"Added: {alias} ({dataset_id})")
            case datasets.DatasetSkipped(alias=alias, reason=reason):
                terminal.info(f"Skipped: {alias}: {reason}")
            case datasets.DatasetNotAdded(alias=alias, error=error):
                print(f"Failed: {alias}: {error}", file=sys.stderr)
            case datasets.DatasetDeleted(alias=alias, dataset_id=dataset_id):
                terminal.info(f"Deleted: {alias} ({dataset_id})")
