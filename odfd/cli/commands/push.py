"""``odfd push DATASET URL``: publish a dataset to an ``http(s)://`` node (Smart Transfer
Protocol, bearer token), a ``file://`` folder or ``ipns://`` (IPFS)."""

from __future__ import annotations

import argparse
import os
import sys

from odfd.cli.remote_pull import TOKEN_ENV
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.sync.progress import Progress
from odfd.sync.push import PushOptions, push
from storage.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "push", help="publish a dataset to a remote (http(s)://, file://, ipns://)"
    )
    parser.add_argument("dataset", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "url",
        metavar="URL",
        help="remote: http(s)://host/[account/]name, file:///path, or ipns://[KEY] "
        "(no KEY: a key named after the dataset)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace a remote history that diverged or is ahead"
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


def _push(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        options = PushOptions(force=args.force, token=args.token, parallel=args.parallel)
        result = await push(
            workspace,
            args.dataset,
            args.url,
            options=options,
            progress=Progress(f"push {args.dataset}"),
        )
        verb = "Pushed" if result.updated else "Skipped"
        print(f"{verb}: {result.alias}: {result.describe()}", file=sys.stderr)
        return 0

    return run_in_workspace(args, run)
