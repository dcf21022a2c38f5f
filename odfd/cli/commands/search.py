"""``odfd search [QUERY]``: datasets whose name contains QUERY, in this workspace and on the named
repositories (``odfd repo add``)."""

from __future__ import annotations

import argparse

from odfd.cli import console
from odfd.cli.arguments import positive_int
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.config import load_config
from odfd.sync.errors import SyncError
from odfd.sync.repos import RepoError
from odfd.sync.search import search_repo
from odfd.sync.transport.settings import TransportSettings
from protocol.errors import OdfError
from storage.workspace import Workspace


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
    async def run(workspace: Workspace) -> int:
        needle = args.query.lower()
        rows: list[dict[str, str | None]] = []
        if args.repo is None:
            for record in await workspace.list_datasets():
                if needle in record.alias.lower():
                    rows.append(
                        {
                            "repo": "(local)",
                            "alias": record.alias,
                            "kind": record.kind.value,
                            "url": str(record.id),
                        }
                    )
        failed = 0
        if not args.local:
            repos = dict(await workspace.catalog.list_remotes())
            names = args.repo if args.repo is not None else list(repos)
            unknown = [n for n in names if n not in repos]
            if unknown:
                raise RepoError(f"no repository named {', '.join(unknown)} (`odfd repo list`)")
            settings = TransportSettings.from_config(load_config(workspace.layout.config_path))
            for name in names:
                try:
                    found = await search_repo(name, repos[name], args.query, settings)
                except (SyncError, OdfError) as err:
                    console.warn(f"repository {name}: {err}")
                    failed += 1
                    continue
                rows += [
                    {"repo": f.repo, "alias": f.alias, "kind": f.kind, "url": f.url} for f in found
                ]
        if args.max_results is not None:
            rows = rows[: args.max_results]
        write_records(
            rows,
            args.output,
            [("Repo", "repo"), ("Name", "alias"), ("Kind", "kind"), ("URL", "url")],
        )
        return 1 if failed else 0

    return run_in_workspace(args, run)
