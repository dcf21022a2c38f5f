"""``odfd pull``: bring datasets up to date from their sources.

A root dataset ingests from its polling source (every new file of a glob, one block each); a
derivative dataset runs its transform over what its inputs gained. ``--recursive`` updates the
inputs first. URLs, and datasets that were pulled from a remote, are replication pulls handled by
``odfd.cli.remote_pull``.
"""

from __future__ import annotations

import argparse

from odfd.cli import console, remote_pull
from odfd.cli.status_line import working
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.coordinator.engine import open_engines
from odfd.coordinator.pull import pull_local
from odfd.sync.errors import SyncError
from odfd.sync.repos import expand
from odfd.sync.transport.url import looks_like_url
from protocol.errors import ParseError
from protocol.model import Timestamp
from storage.catalog import DatasetRecord
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pull", help="update datasets from their sources (ingest or transform)"
    )
    parser.add_argument(
        "datasets",
        nargs="*",
        metavar="DATASET",
        help="dataset alias or id, a remote URL, or REPO/NAME of a named repository",
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

    async def run(workspace: Workspace) -> int:
        if args.all:
            return await _pull_all(workspace, args)
        args.datasets = [await _expanded(workspace, ref) for ref in args.datasets]
        if await remote_pull.is_remote_pull(workspace, args):
            return await remote_pull.run(workspace, args)
        return await _pull_local(workspace, args, args.datasets, recursive=args.recursive)

    return run_in_workspace(args, run)


async def _expanded(workspace: Workspace, ref: str) -> str:
    """A local dataset stays as it is; ``REPO/NAME`` of a named repository becomes its URL."""
    if looks_like_url(ref):
        return ref
    try:
        if await workspace.try_resolve(ref) is not None:
            return ref
    except ParseError:
        pass  # not a dataset reference: maybe REPO/NAME
    return await expand(workspace, ref)


async def _pull_all(workspace: Workspace, args: argparse.Namespace) -> int:
    """Datasets that came from a remote are synced first, then every other one is brought up to
    date from its source, upstream first, so derivatives see what their inputs just gained."""
    replicated: list[DatasetRecord] = []
    local: list[DatasetRecord] = []
    for record in await workspace.list_datasets():
        (replicated if await remote_pull.has_remote(workspace, str(record.id)) else local).append(
            record
        )
    if replicated:
        args.datasets = [str(r.id) for r in replicated]
        await remote_pull.run(workspace, args)
    if local:
        await _pull_local(workspace, args, [str(r.id) for r in local], recursive=True)
    return 0


async def _pull_local(
    workspace: Workspace, args: argparse.Namespace, refs: list[str], *, recursive: bool
) -> int:
    engines = open_engines(workspace.layout.config_path)
    async with working(f"pull {', '.join(refs)}"):
        outcomes = await pull_local(
            workspace,
            refs,
            engines=engines,
            recursive=recursive,
            fetch_uncacheable=args.fetch_uncacheable,
            watermark=args.set_watermark,
            on_retry=lambda alias, lost: console.info(
                f"Retrying: {alias}: another write moved its head to {lost.actual} first; "
                "pulling again on top of it"
            ),
            reset_diverged=(
                (
                    lambda alias: console.info(
                        f"Reset: {alias}: an input's history was rewritten, so its data was "
                        "dropped and is recomputed from the start"
                    )
                )
                if args.reset_derivatives_on_diverged_input
                else None
            ),
        )
    for outcome in outcomes:
        verb = "Updated" if outcome.updated else "Skipped"
        console.info(f"{verb}: {outcome.dataset}: {outcome.message}")
    return 0
