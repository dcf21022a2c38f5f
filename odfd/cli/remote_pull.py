"""The replication branch of ``odfd pull``: ``odfd pull URL [--as ALIAS]`` and ``odfd pull
DATASET`` for a dataset that was pulled from a remote. ``odfd.cli.commands.pull`` adds these
options and hands such pulls here."""

from __future__ import annotations

import argparse
import os
import sys

from odfd.cli import console
from odfd.sync.progress import Progress
from odfd.sync.pull import PullOptions, has_remote, pull, pull_from_remotes
from odfd.sync.remote import looks_like_url
from storage.workspace import Workspace

TOKEN_ENV = "ODFD_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pulling from a remote (URL, or a dataset pulled from one)")
    group.add_argument(
        "--as", dest="as_alias", metavar="ALIAS", help="local name of a dataset pulled from a URL"
    )
    group.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="replace a local history that diverged from the remote's",
    )
    group.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="accept a head without a valid owner signature even if the dataset was seen "
        "signed before (docs/signed-heads.md)",
    )
    group.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"bearer token for the remote (default: ${TOKEN_ENV})",
    )
    group.add_argument(
        "--protocol",
        choices=("auto", "smart", "simple"),
        default="auto",
        help="transfer protocol for http(s):// remotes (default: smart when offered)",
    )
    group.add_argument(
        "--parallel", type=int, default=8, metavar="N", help="parallel object downloads"
    )


async def is_remote_pull(workspace: Workspace, args: argparse.Namespace) -> bool:
    """URLs, ``--as``/``--force``, or datasets that have a pull remote are replication pulls."""
    if args.as_alias is not None or args.force:
        return True
    for ref in args.datasets:
        if looks_like_url(ref) or await has_remote(workspace, ref):
            return True
    return False


async def run(workspace: Workspace, args: argparse.Namespace) -> int:
    options = PullOptions(
        force=args.force,
        parallel=args.parallel,
        token=args.token,
        protocol=args.protocol,
        allow_unsigned=args.allow_unsigned,
    )
    if args.as_alias is not None and len(args.datasets) != 1:
        print("error: --as names one dataset: give exactly one URL", file=sys.stderr)
        return 2
    for ref in args.datasets:
        progress = Progress(f"pull {ref}")
        if looks_like_url(ref):
            results = [
                await pull(workspace, ref, alias=args.as_alias, options=options, progress=progress)
            ]
        else:
            results = await pull_from_remotes(workspace, ref, options=options, progress=progress)
        for result in results:
            verb = "Updated" if result.updated else "Skipped"
            console.info(
                f"{verb}: {result.alias} from {result.remote}: {result.describe()} [{result.trust}]"
            )
            if result.trust_note:
                console.info(f"note: {result.trust_note}")
    return 0
