"""``odfd repo add|list|delete`` (named remote repositories) and ``odfd repo alias
add|list|delete`` (the remotes a dataset pulls from and pushes to, kept in its
``info/config`` as the reference keeps them)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from odfd.app import repos
from odfd.cli import terminal
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.catalog.catalog import RemoteAliasKind


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("repo", help="named remote repositories and dataset aliases")
    actions = parser.add_subparsers(dest="repo_command", metavar="ACTION", required=True)

    add = actions.add_parser("add", help="name a remote repository (a URL datasets live under)")
    add.add_argument("name", metavar="NAME", help="the name, used as NAME/DATASET")
    add.add_argument("url", metavar="URL", help="the URL the datasets live under")
    add_root_argument(add)
    add.set_defaults(func=_add)

    listing = actions.add_parser("list", help="the named repositories")
    add_output_format(listing)
    add_root_argument(listing)
    listing.set_defaults(func=_list)

    delete = actions.add_parser("delete", help="forget named repositories")
    delete.add_argument("names", nargs="*", metavar="NAME", help="repositories to forget")
    delete.add_argument("-a", "--all", action="store_true", help="forget every repository")
    add_root_argument(delete)
    delete.set_defaults(func=_delete)

    alias = actions.add_parser("alias", help="the remotes a dataset pulls from / pushes to")
    alias_actions = alias.add_subparsers(dest="alias_command", metavar="ACTION", required=True)
    alias_add = alias_actions.add_parser("add", help="add a pull or push remote to a dataset")
    alias_add.add_argument("dataset", metavar="DATASET", help="local dataset alias or id")
    alias_add.add_argument("remote", metavar="URL|REPO/NAME", help="the remote dataset")
    _direction(alias_add)
    add_root_argument(alias_add)
    alias_add.set_defaults(func=_alias_add)

    alias_list = alias_actions.add_parser(
        "list", help="the remotes of one or every dataset, each with its last pull or push"
    )
    alias_list.add_argument("dataset", nargs="?", metavar="DATASET", help="default: every dataset")
    add_output_format(alias_list)
    add_root_argument(alias_list)
    alias_list.set_defaults(func=_alias_list)

    alias_delete = alias_actions.add_parser("delete", help="remove remotes from a dataset")
    alias_delete.add_argument("dataset", metavar="DATASET", help="local dataset alias or id")
    alias_delete.add_argument(
        "remote", nargs="?", metavar="URL|REPO/NAME", help="the remote to remove (or --all)"
    )
    alias_delete.add_argument(
        "-a", "--all", action="store_true", help="every remote of the dataset"
    )
    _direction(alias_delete)
    add_root_argument(alias_delete)
    alias_delete.set_defaults(func=_alias_delete)


def _direction(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--pull", action="store_true", help="a remote to pull from (default)")
    group.add_argument("--push", action="store_true", help="a remote to push to")


def _add(args: argparse.Namespace) -> int:
    repos.checked_repo(args.name, args.url)  # argument errors before the workspace opens

    async def run(node: Node) -> int:
        name, url = await repos.add_repo(node, args.name, args.url)
        terminal.info(f"Added: {name} -> {url}")
        return 0

    return run_in_node(args, run)


def _list(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        rows = [{"name": n, "url": u} for n, u in await repos.list_repos(node)]
        write_records(rows, args.output, [("Name", "name"), ("URL", "url")])
        return 0

    return run_in_node(args, run)


def _delete(args: argparse.Namespace) -> int:
    chosen = repos.chosen_repos(args.names, args.all)

    async def run(node: Node) -> int:
        for name in await repos.delete_repos(node, chosen):
            terminal.info(f"Deleted: {name}")
        return 0

    return run_in_node(args, run)


def _kind(args: argparse.Namespace) -> RemoteAliasKind:
    return "push" if args.push else "pull"


def _alias_add(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        kind = _kind(args)
        record, remote, added = await repos.add_alias(node, args.dataset, args.remote, kind)
        if added:
            terminal.info(f"Added: {record.alias} {kind} {remote}")
        else:
            terminal.info(f"Skipped: {record.alias} already {kind}s {remote}")
        return 0

    return run_in_node(args, run)


def _alias_list(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        rows = [_alias_row(entry) for entry in await repos.list_aliases(node, args.dataset)]
        if args.output == "table":
            for row in rows:
                row["synced_short"] = (
                    None if row["synced_head"] is None else row["synced_head"][-8:]
                )
                row["synced_at_short"] = (
                    None if row["synced_at"] is None else row["synced_at"][:19].replace("T", " ")
                )
        write_records(rows, args.output, _ALIAS_COLUMNS)
        return 0

    return run_in_node(args, run)


_ALIAS_COLUMNS = [
    ("Dataset", "dataset"),
    ("Kind", "kind"),
    ("Remote", "remote"),
    ("Synced head", "synced_short"),
    ("Synced at", "synced_at_short"),
]


def _alias_row(entry: repos.RemoteEntry) -> dict[str, Any]:
    """A remote with the head both sides had after the last pull or push between them."""
    return {
        "dataset": entry.dataset,
        "kind": entry.kind,
        "remote": entry.remote,
        "synced_head": None if entry.synced_head is None else str(entry.synced_head),
        "synced_at": None
        if entry.synced_at is None
        else entry.synced_at.isoformat().replace("+00:00", "Z"),
    }


def _alias_delete(args: argparse.Namespace) -> int:
    chosen = repos.chosen_remote(args.remote, args.all)

    async def run(node: Node) -> int:
        kinds = repos.KINDS if args.all and not (args.pull or args.push) else (_kind(args),)
        record, remote = await repos.delete_alias(node, args.dataset, chosen, kinds)
        if remote is None:
            terminal.info(f"Deleted: every {'/'.join(kinds)} remote of {record.alias}")
        else:
            terminal.info(f"Deleted: {record.alias} {kinds[0]} {remote}")
        return 0

    return run_in_node(args, run)
