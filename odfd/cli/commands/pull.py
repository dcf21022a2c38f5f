"""``odfd pull``: bring datasets up to date from their sources.

A root dataset ingests from its polling source (every new file of a glob, one block each); a
derivative dataset runs its transform over what its inputs gained. ``--recursive`` updates the
inputs first. URLs, and datasets that were pulled from a remote, are replication pulls handled by
``odfd.cli.remote_pull``.
"""

from __future__ import annotations

import argparse

from odfd.cli import console, remote_pull
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.coordinator.engine import configure_engine
from odfd.coordinator.pull import pull_local
from protocol.model import Timestamp
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pull", help="update datasets from their sources (ingest or transform)"
    )
    parser.add_argument(
        "datasets", nargs="+", metavar="DATASET", help="dataset alias or id, or a remote URL"
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
    remote_pull.add_arguments(parser)
    add_root_argument(parser)
    parser.set_defaults(func=_pull)


def _pull(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        if await remote_pull.is_remote_pull(workspace, args):
            return await remote_pull.run(workspace, args)
        configure_engine(workspace.layout.config_path)
        outcomes = await pull_local(
            workspace,
            args.datasets,
            recursive=args.recursive,
            fetch_uncacheable=args.fetch_uncacheable,
            watermark=args.set_watermark,
        )
        for outcome in outcomes:
            verb = "Updated" if outcome.updated else "Skipped"
            console.info(f"{verb}: {outcome.dataset}: {outcome.message}")
        return 0

    return run_in_workspace(args, run)
