"""``odfd push``: publish datasets to an ``http(s)://`` node (Smart Transfer Protocol, bearer
token), a ``file://`` folder or ``ipns://`` (IPFS).

``odfd push DATASET URL`` (or ``--to URL``) pushes to that remote and remembers it as the
dataset's push remote; ``odfd push DATASET`` pushes to the remembered ones. ``--all`` pushes
every dataset, ``--recursive`` also the datasets a derivative reads; with ``--to REPO`` (a
named repository or base URL) each goes to ``REPO/<its name>``. Every destination is worked out
before the first push, so a dataset without one stops the command before anything moved.
"""

from __future__ import annotations

import argparse
import os

from odfd.cli import console
from odfd.cli.remote_pull import TOKEN_ENV
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.config import load_config
from odfd.sync.progress import Progress
from odfd.sync.push import PushOptions, push
from odfd.sync.repos import RepoError, expand, join
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.url import looks_like_url
from storage.catalog import DatasetRecord
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "push", help="publish datasets to a remote (http(s)://, file://, ipns://)"
    )
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="DATASET [URL]",
        help="dataset alias or id, then optionally the remote: http(s)://host/[account/]name, "
        "file:///path, ipns://[KEY] (no KEY: a key named after the dataset), or REPO/NAME",
    )
    parser.add_argument("--to", metavar="URL|REPO", help="where to push (see above)")
    parser.add_argument("-a", "--all", action="store_true", help="push every dataset")
    parser.add_argument(
        "-r", "--recursive", action="store_true", help="also push the datasets these read"
    )
    parser.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="replace a remote history that diverged or is ahead",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"bearer token the remote accepts for pushes (default: ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--parallel", type=int, default=8, metavar="N", help="parallel object uploads"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_push)


def _split_targets(args: argparse.Namespace) -> tuple[list[str], str | None]:
    refs, to = list(args.targets), args.to
    if to is None and len(refs) == 2 and looks_like_url(refs[1]):
        refs, to = refs[:1], refs[1]  # the long-standing `push DATASET URL`
    if bool(refs) == bool(args.all):
        raise RepoError("name the datasets to push, or pass --all (not both)")
    return refs, to


def _push(args: argparse.Namespace) -> int:
    refs, to = _split_targets(args)

    async def run(workspace: Workspace) -> int:
        records = (
            await workspace.list_datasets()
            if args.all
            else [await workspace.resolve(ref) for ref in refs]
        )
        if args.recursive:
            records = await _with_inputs(workspace, records)
        plan = await _destinations(workspace, records, to, several=len(records) > 1)
        options = PushOptions(force=args.force, token=args.token, parallel=args.parallel)
        settings = TransportSettings.from_config(load_config(workspace.layout.config_path))
        for record, urls in plan:
            for url in urls:
                result = await push(
                    workspace,
                    str(record.id),
                    url,
                    options=options,
                    progress=Progress(f"push {record.alias}"),
                    settings=settings,
                )
                verb = "Pushed" if result.updated else "Skipped"
                console.info(f"{verb}: {result.alias}: {result.describe()}")
        return 0

    return run_in_workspace(args, run)


async def _with_inputs(workspace: Workspace, records: list[DatasetRecord]) -> list[DatasetRecord]:
    """``records`` and everything they read that is here, inputs before their readers."""
    graph = await workspace.graph()
    order = graph.upstream_order([r.id for r in records], skip_missing=True)
    return [graph.records[dataset_id] for dataset_id in order]


async def _destinations(
    workspace: Workspace, records: list[DatasetRecord], to: str | None, *, several: bool
) -> list[tuple[DatasetRecord, list[str]]]:
    plan = []
    missing = []
    base = None if to is None else await expand(workspace, to)
    for record in records:
        if base is not None:
            plan.append((record, [join(base, record.alias) if several else base]))
            continue
        urls = (await workspace.open_dataset(record.id).remote_aliases())["push"]
        if not urls:
            missing.append(record.alias)
        plan.append((record, urls))
    if missing:
        raise RepoError(
            f"no push remote for {', '.join(missing)}: give --to URL|REPO, or add one with "
            "`odfd repo alias add DATASET URL --push`; nothing was pushed"
        )
    return plan
