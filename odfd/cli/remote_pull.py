"""The replication branch of ``odfd pull``: ``odfd pull URL [--as ALIAS]`` and ``odfd pull
DATASET`` for a dataset that was pulled from a remote. ``odfd.cli.commands.pull`` adds these
options and hands such pulls here. The replication code (aiohttp, the IPFS client) is imported
only when a pull really replicates, so a local pull does not pay for it at start-up."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import TYPE_CHECKING

from odfd.cli import console
from odfd.config import NodeConfig, load_config, parse_duration
from odfd.sync.errors import SyncError
from odfd.sync.transport.url import looks_like_url
from storage.workspace import Workspace

if TYPE_CHECKING:
    from odfd.sync.pull import PullOptions

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
    group.add_argument(
        "--connect-timeout",
        type=_duration,
        metavar="DURATION",
        help="give up connecting to the peer after this long (default: [sync] connect_timeout, 10s)",
    )
    group.add_argument(
        "--first-byte-timeout",
        type=_duration,
        metavar="DURATION",
        help="give up on a peer silent this long (default: [sync] first_byte_timeout, 30s)",
    )
    group.add_argument(
        "--min-rate",
        type=int,
        metavar="BYTES_PER_S",
        help="give up on a transfer slower than this over [sync] rate_window "
        "(default: [sync] min_rate, 1024; 0: no minimum)",
    )
    group.add_argument(
        "--timeout",
        type=_duration,
        metavar="DURATION",
        help="give up on the whole pull after this long (default: [sync] operation_timeout, none)",
    )


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds


def pull_options(config: NodeConfig, args: argparse.Namespace) -> PullOptions:
    """The options of ``args``, time-outs defaulting to the node's ``[sync]`` settings."""
    from odfd.sync.pull import PullOptions

    sync = config.sync
    limits = sync.limits()
    changes = {
        "connect": args.connect_timeout,
        "first_byte": args.first_byte_timeout,
        "min_rate": args.min_rate,
    }
    limits = dataclasses.replace(limits, **{k: v for k, v in changes.items() if v is not None})
    if limits.min_rate < 0:
        raise SyncError("--min-rate must be 0 or more bytes per second")
    return PullOptions(
        force=args.force,
        parallel=args.parallel,
        token=args.token,
        protocol=args.protocol,
        limits=limits,
        operation_timeout=args.timeout if args.timeout is not None else sync.pull_timeout(),
        allow_unsigned=args.allow_unsigned,
    )


async def is_remote_pull(workspace: Workspace, args: argparse.Namespace) -> bool:
    """URLs, ``--as``/``--force``, or datasets that have a pull remote are replication pulls."""
    if args.as_alias is not None or args.force:
        return True
    for ref in args.datasets:
        if looks_like_url(ref) or await has_remote(workspace, ref):
            return True
    return False


async def has_remote(workspace: Workspace, ref: str) -> bool:
    """Whether ``ref`` names a dataset with a pull remote (``odfd pull`` replicates it)."""
    record = await workspace.try_resolve(ref)
    return record is not None and bool(await workspace.catalog.remote_aliases(record.id, "pull"))


async def run(workspace: Workspace, args: argparse.Namespace) -> int:
    from odfd.sync.progress import Progress
    from odfd.sync.pull import pull, pull_from_remotes
    from odfd.sync.transport.settings import TransportSettings

    config = load_config(workspace.layout.config_path)
    options = pull_options(config, args)
    settings = TransportSettings.from_config(config)
    if args.as_alias is not None and len(args.datasets) != 1:
        print("error: --as names one dataset: give exactly one URL", file=sys.stderr)
        return 2
    for ref in args.datasets:
        progress = Progress(f"pull {ref}")
        if looks_like_url(ref):
            results = [
                await pull(
                    workspace,
                    ref,
                    alias=args.as_alias,
                    options=options,
                    progress=progress,
                    settings=settings,
                )
            ]
        else:
            results = await pull_from_remotes(
                workspace, ref, options=options, progress=progress, settings=settings
            )
        for result in results:
            for note in result.recovered:
                console.info(f"Recovered: {note}")
            verb = "Updated" if result.updated else "Skipped"
            console.info(
                f"{verb}: {result.alias} from {result.remote}: {result.describe()} [{result.trust}]"
            )
            if result.trust_note:
                console.info(f"note: {result.trust_note}")
    return 0
