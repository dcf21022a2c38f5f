"""The remote options of ``odfd pull`` (``--as``, ``--force``, time-outs, ...) and how a pull's
events are printed. What a pull does is ``odfd.app.pull``; the replication code (aiohttp, the
IPFS client) is imported only when a pull really replicates."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.arguments import positive_duration

if TYPE_CHECKING:
    from odfd.app.events import Event

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
        type=positive_duration,
        metavar="DURATION",
        help="give up connecting to the peer after this long (default: [sync] connect_timeout, 10s)",
    )
    group.add_argument(
        "--first-byte-timeout",
        type=positive_duration,
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
        type=positive_duration,
        metavar="DURATION",
        help="give up on the whole pull after this long (default: [sync] operation_timeout, none)",
    )


class Printer:
    """A pull's events as status lines."""

    def emit(self, event: Event) -> None:
        from odfd.app import pull
        from odfd.app.events import Recovered

        match event:
            case Recovered(what=what):
                terminal.info(f"Recovered: {what}")
            case pull.Replicated() as done:
                verb = "Updated" if done.updated else "Skipped"
                terminal.info(
                    f"{verb}: {done.alias} from {done.remote}: {done.description} [{done.trust}]"
                )
                if done.trust_note:
                    terminal.info(f"note: {done.trust_note}")
            case pull.PullRetrying(alias=alias, head=head):
                terminal.info(
                    f"Retrying: {alias}: another write moved its head to {head} first; "
                    "pulling again on top of it"
                )
            case pull.Pulled() as done:
                verb = "Updated" if done.updated else "Skipped"
                terminal.info(f"{verb}: {done.alias}: {done.message}")
            case pull.DerivativeReset(alias=alias):
                terminal.info(
                    f"Reset: {alias}: an input's history was rewritten, so its data was "
                    "dropped and is recomputed from the start"
                )
