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
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.remote_pull import TOKEN_ENV
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.events import Event
    from odfd.app.node import Node


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


def _push(args: argparse.Namespace) -> int:
    from odfd.app.push import PushRequest, push_datasets, split_targets

    refs, to = split_targets(args.targets, args.to, args.all)

    async def run(node: Node) -> int:
        request = PushRequest(
            refs=None if args.all else refs,
            to=to,
            recursive=args.recursive,
            force=args.force,
            token=args.token,
            parallel=args.parallel,
        )
        await push_datasets(node, request, _Printer(), show_progress=True)
        return 0

    return run_in_node(args, run)


class _Printer:
    def emit(self, event: Event) -> None:
        from odfd.app.push import Pushed

        if isinstance(event, Pushed):
            verb = "Pushed" if event.updated else "Skipped"
            terminal.info(f"{verb}: {event.alias}: {event.description}")
