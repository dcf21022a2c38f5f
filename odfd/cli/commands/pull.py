"""``odfd pull``: bring datasets up to date from their sources.

A root dataset ingests from its polling source (every new file of a glob, one block each); a
derivative dataset runs its transform over what its inputs gained. ``--recursive`` updates the
inputs first. URLs, and datasets that were pulled from a remote, are replication pulls handled by
``odfd.cli.remote_pull``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import remote_pull, terminal
from odfd.cli.status_line import working
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.sync.errors import SyncError
from protocol.model import Timestamp

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pull", help="update datasets from their sources (ingest or transform)"
    )
    parser.add_argument(
        "datasets",
        nargs="*",
        metavar="DATASET",
        help="dataset alias or id, a remote URL, REPO/NAME of a named repository, or the DID "
        "of a dataset this node does not hold (found over IPNS)",
    )
    parser.add_argument(
        "-a", "--all", action="store_true", help="update every dataset of the workspace"
    )
    parser.add_argument(
        "--recursive", "-r", action="store_true", help="update upstream datasets first"
    )
    parser.add_argument(
        "--fetch-uncacheable",
        action="store_true",
        help="re-fetch sources that give no ETag / Last-Modified to tell whether they changed",
    )
    parser.add_argument(
        "--set-watermark",
        type=Timestamp.parse_rfc3339,
        metavar="TIME",
        help="instead of ingesting, advance a root dataset's watermark to TIME (RFC 3339)",
    )
    parser.add_argument(
        "--reset-derivatives-on-diverged-input",
        action="store_true",
        help="recompute a derivative from the start when an input's history was rewritten "
        "(compacted or reset) since it last read it, instead of failing",
    )
    remote_pull.add_arguments(parser)
    add_root_argument(parser)
    parser.set_defaults(func=_pull)


def _pull(args: argparse.Namespace) -> int:
    if bool(args.datasets) == bool(args.all):
        raise SyncError("name the datasets to pull, or pass --all (not both)")

    async def run(node: Node) -> int:
        from odfd.app import pull

        if args.all:
            replicated, local = await pull.split_for_all(node)
            if replicated:
                args.datasets = [str(r.id) for r in replicated]
                await remote_pull.run(node, args)
            if local:
                await _pull_local(node, args, [str(r.id) for r in local], recursive=True)
            return 0
        args.datasets = [await pull.expanded(node, ref) for ref in args.datasets]
        if await pull.is_replication(node, args.datasets, as_alias=args.as_alias, force=args.force):
            return await remote_pull.run(node, args)
        return await _pull_local(node, args, args.datasets, recursive=args.recursive)

    return run_in_node(args, run)


async def _pull_local(
    node: Node, args: argparse.Namespace, refs: list[str], *, recursive: bool
) -> int:
    from odfd.app.pull import LocalPull, pull_local

    how = LocalPull(
        recursive=recursive,
        fetch_uncacheable=args.fetch_uncacheable,
        watermark=args.set_watermark,
        reset_diverged=args.reset_derivatives_on_diverged_input,
    )
    async with working(f"pull {', '.join(refs)}"):
        outcomes = await pull_local(node, refs, how, remote_pull.Printer())
    for outcome in outcomes:
        verb = "Updated" if outcome.updated else "Skipped"
        terminal.info(f"{verb}: {outcome.dataset}: {outcome.message}")
    return 0
