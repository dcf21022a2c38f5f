"""``odfd pull``: bring datasets up to date from their sources.

A root dataset ingests from its polling source (every new file of a glob, one block each); a
derivative dataset runs its transform over what its inputs gained. ``--recursive`` updates the
inputs first. URLs, and datasets that were pulled from a remote, are replication pulls (their
options: ``odfd.cli.remote_pull``). What a pull does is ``odfd.app.pull``; this module parses the
arguments and prints its events.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.app.pull import EVENTS, PullRequest
from odfd.cli import remote_pull
from odfd.cli.arguments import parse_rfc3339
from odfd.cli.forwarded_rendering import StatusLineRendering
from odfd.cli.workspace_args import add_root_argument, run_in_node

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
        type=parse_rfc3339,
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
    parser.set_defaults(func=_pull, forward=forward)


def _request(args: argparse.Namespace) -> PullRequest:
    request = PullRequest(
        tuple(args.datasets),
        all=args.all,
        recursive=args.recursive,
        fetch_uncacheable=args.fetch_uncacheable,
        set_watermark=args.set_watermark,
        reset_diverged=args.reset_derivatives_on_diverged_input,
        as_alias=args.as_alias,
        force=args.force,
        allow_unsigned=args.allow_unsigned,
        token=args.token,
        protocol=args.protocol,
        parallel=args.parallel,
        connect_timeout=args.connect_timeout,
        first_byte_timeout=args.first_byte_timeout,
        min_rate=args.min_rate,
        timeout=args.timeout,
    )
    request.check()
    return request


def forward(args: argparse.Namespace) -> tuple[PullRequest, StatusLineRendering] | str:
    """The request a daemon runs for this command line, or why it runs here."""
    request = _request(args)
    if request.names_a_url():
        return "it pulls from a remote URL (no engine to share)"
    return request, StatusLineRendering(EVENTS, remote_pull.Printer())


def _pull(args: argparse.Namespace) -> int:
    request = _request(args)

    async def run(node: Node) -> int:
        from odfd.app.pull import pull
        from odfd.cli.status_line import working

        await pull(node, request, remote_pull.Printer(), around=working, show_progress=True)
        return 0

    return run_in_node(args, run)
