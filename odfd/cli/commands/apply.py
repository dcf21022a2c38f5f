"""``odfd apply -f FILE|DIR``: declare resources (every type of ``odfd.app.resource_types``:
RFC-018's and odfd's ``Mirror``), then have the controllers reconcile them — the running daemon's, else in this
process. Re-applying an unchanged manifest changes nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.controllers import Reconciler
from odfd.app.resources import Manifest, apply_manifests, kind_of, load_manifests
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.daemon.admin_client import AdminClient

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "apply", help="create or update resources from manifests (Dataset, Source, SecretSet, ...)"
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="paths",
        action="append",
        type=Path,
        required=True,
        metavar="FILE|DIR",
        help="manifest file, or folder of *.yaml/*.yml/*.json (repeatable)",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_apply)


def _apply(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        workspace = node.workspace
        manifests = load_manifests(args.paths)
        _warn_of_literal_secrets(manifests)
        results = await apply_manifests(workspace, manifests)
        for result in results:
            record = result.record
            print(
                f"{kind_of(record.schema)}/{record.name} {result.change} (generation {record.generation})",
                file=sys.stderr,
            )
        client = await AdminClient.connect(workspace.layout, node.config.daemon.admin_socket)
        if client is not None:
            answer = await client.request("POST", "/reconcile")
            phases = {
                (r["kind"], r["name"]): (r["phase"], r["message"]) for r in answer["resources"]
            }
        else:
            reconciler = Reconciler(workspace, node.config.sync)
            phases = {
                (kind_of(r.resource.schema), r.resource.name): (r.phase, r.message)
                for r in await reconciler.reconcile_all()
            }
        failed = 0
        for result in results:
            kind, name = kind_of(result.record.schema), result.record.name
            phase, message = phases.get((kind, name), ("Pending", None))
            failed += phase == "Failed"
            if phase != "Ready" or (message and result.change != "unchanged"):
                print(
                    f"{kind}/{name}: {phase}" + (f": {message}" if message else ""), file=sys.stderr
                )
        return 1 if failed else 0

    return run_in_node(args, run)


def _warn_of_literal_secrets(manifests: list[Manifest]) -> None:
    """Before anything is applied, as ``odfd add`` does: one warning for each credential a
    ``Dataset`` manifest holds in the clear (``odfd.app.manifest_secrets``)."""
    from odfd.app.manifest_secrets import applied_literal_secrets
    from odfd.cli import terminal

    for secret in applied_literal_secrets(manifests):
        terminal.warn(secret.message())
