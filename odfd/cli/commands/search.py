"""``odfd search [QUERY]``: datasets whose name contains QUERY, in this workspace and on the named
repositories (``odfd repo add``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.arguments import positive_int
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.events import Event
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search", help="find datasets by name here and on the named repositories"
    )
    parser.add_argument("query", nargs="?", default="", metavar="QUERY", help="part of a name")
    parser.add_argument("-l", "--local", action="store_true", help="only this workspace")
    parser.add_argument(
        "--repo", action="append", metavar="NAME", help="only this repository (repeatable)"
    )
    parser.add_argument(
        "-n", "--max-results", type=positive_int, default=None, metavar="N", help="at most N"
    )
    add_output_format(parser)
    add_root_argument(parser)
    parser.set_defaults(func=_search)


def _search(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.search import search

        found, failed = await search(
            node, args.query, local_only=args.local, repos=args.repo, sink=_Printer()
        )
        rows = [{"repo": f.repo, "alias": f.alias, "kind": f.kind, "url": f.url} for f in found]
        if args.max_results is not None:
            rows = rows[: args.max_results]
        write_records(
            rows,
            args.output,
            [("Repo", "repo"), ("Name", "alias"), ("Kind", "kind"), ("URL", "url")],
        )
        return 1 if failed else 0

    return run_in_node(args, run)


class _Printer:
    def emit(self, event: Event) -> None:
        from odfd.app.search import RepoSearchFailed

        if isinstance(event, RepoSearchFailed):
            terminal.warn(f"repository {event.repo}: {event.error}")
