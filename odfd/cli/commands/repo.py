"""``odfd repo add|list|delete`` (named remote repositories) and ``odfd repo alias
add|list|delete`` (the remotes a dataset pulls from and pushes to, kept in its
``info/config`` as the reference keeps them)."""

from __future__ import annotations

import argparse

from odfd.cli import console
from odfd.cli.output import add_output_format, write_records
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.sync.repos import RepoError, check_name, check_url, expand
from odfd.sync.transport.url import canonical_url
from storage.catalog import DatasetRecord
from storage.catalog.catalog import RemoteAliasKind
from storage.errors import DatasetExistsError
from storage.workspace import Workspace

_KINDS: tuple[RemoteAliasKind, ...] = ("pull", "push")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("repo", help="named remote repositories and dataset aliases")
    actions = parser.add_subparsers(dest="repo_command", metavar="ACTION", required=True)

    add = actions.add_parser("add", help="name a remote repository (a URL datasets live under)")
    add.add_argument("name", metavar="NAME")
    add.add_argument("url", metavar="URL")
    add_root_argument(add)
    add.set_defaults(func=_add)

    listing = actions.add_parser("list", help="the named repositories")
    add_output_format(listing)
    add_root_argument(listing)
    listing.set_defaults(func=_list)

    delete = actions.add_parser("delete", help="forget named repositories")
    delete.add_argument("names", nargs="*", metavar="NAME")
    delete.add_argument("-a", "--all", action="store_true", help="forget every repository")
    add_root_argument(delete)
    delete.set_defaults(func=_delete)

    alias = actions.add_parser("alias", help="the remotes a dataset pulls from / pushes to")
    alias_actions = alias.add_subparsers(dest="alias_command", metavar="ACTION", required=True)
    alias_add = alias_actions.add_parser("add", help="add a pull or push remote to a dataset")
    alias_add.add_argument("dataset", metavar="DATASET")
    alias_add.add_argument("remote", metavar="URL|REPO/NAME")
    _direction(alias_add)
    add_root_argument(alias_add)
    alias_add.set_defaults(func=_alias_add)

    alias_list = alias_actions.add_parser("list", help="the remotes of one or every dataset")
    alias_list.add_argument("dataset", nargs="?", metavar="DATASET")
    add_output_format(alias_list)
    add_root_argument(alias_list)
    alias_list.set_defaults(func=_alias_list)

    alias_delete = alias_actions.add_parser("delete", help="remove remotes from a dataset")
    alias_delete.add_argument("dataset", metavar="DATASET")
    alias_delete.add_argument("remote", nargs="?", metavar="URL|REPO/NAME")
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
    name, url = check_name(args.name), check_url(args.url)

    async def run(workspace: Workspace) -> int:
        try:
            await workspace.catalog.add_remote(name, url)
        except DatasetExistsError:
            raise RepoError(
                f"a repository named {name} exists already (`odfd repo list`)"
            ) from None
        console.info(f"Added: {name} -> {url}")
        return 0

    return run_in_workspace(args, run)


def _list(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        rows = [{"name": n, "url": u} for n, u in await workspace.catalog.list_remotes()]
        write_records(rows, args.output, [("Name", "name"), ("URL", "url")])
        return 0

    return run_in_workspace(args, run)


def _delete(args: argparse.Namespace) -> int:
    if bool(args.names) == bool(args.all):
        raise RepoError("name the repositories to delete, or pass --all (not both)")

    async def run(workspace: Workspace) -> int:
        known = dict(await workspace.catalog.list_remotes())
        names = list(known) if args.all else args.names
        unknown = [n for n in names if n not in known]
        if unknown:
            raise RepoError(f"no repository named {', '.join(unknown)}; nothing was deleted")
        for name in names:
            await workspace.catalog.remove_remote(name)
            console.info(f"Deleted: {name}")
        return 0

    return run_in_workspace(args, run)


def _kind(args: argparse.Namespace) -> RemoteAliasKind:
    return "push" if args.push else "pull"


async def _set(
    workspace: Workspace, record: DatasetRecord, kind: RemoteAliasKind, refs: list[str]
) -> None:
    """Both places the reference's layout and odfd keep remote aliases in."""
    await workspace.open_dataset(record.id).set_remote_aliases(kind, refs)
    await workspace.catalog.set_remote_aliases(record.id, kind, refs)


def _alias_add(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        record = await workspace.resolve(args.dataset)
        url = check_url(await expand(workspace, args.remote))
        kind = _kind(args)
        refs = (await workspace.open_dataset(record.id).remote_aliases())[kind]
        remote = canonical_url(url)
        if remote in refs:
            console.info(f"Skipped: {record.alias} already {kind}s {remote}")
            return 0
        await _set(workspace, record, kind, [*refs, remote])
        console.info(f"Added: {record.alias} {kind} {remote}")
        return 0

    return run_in_workspace(args, run)


def _alias_list(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        records = (
            [await workspace.resolve(args.dataset)]
            if args.dataset
            else await workspace.list_datasets()
        )
        rows = []
        for record in records:
            aliases = await workspace.open_dataset(record.id).remote_aliases()
            for kind in _KINDS:
                rows += [
                    {"dataset": record.alias, "kind": kind, "remote": ref} for ref in aliases[kind]
                ]
        write_records(
            rows, args.output, [("Dataset", "dataset"), ("Kind", "kind"), ("Remote", "remote")]
        )
        return 0

    return run_in_workspace(args, run)


def _alias_delete(args: argparse.Namespace) -> int:
    if (args.remote is None) == (not args.all):
        raise RepoError("name the remote to delete, or pass --all (not both)")

    async def run(workspace: Workspace) -> int:
        record = await workspace.resolve(args.dataset)
        aliases = await workspace.open_dataset(record.id).remote_aliases()
        kinds = _KINDS if args.all and not (args.pull or args.push) else (_kind(args),)
        if args.all:
            for kind in kinds:
                await _set(workspace, record, kind, [])
            console.info(f"Deleted: every {'/'.join(kinds)} remote of {record.alias}")
            return 0
        remote = canonical_url(await expand(workspace, args.remote))
        kind = kinds[0]
        if remote not in aliases[kind]:
            raise RepoError(
                f"{record.alias} has no {kind} remote {remote} (`odfd repo alias list`)"
            )
        await _set(workspace, record, kind, [r for r in aliases[kind] if r != remote])
        console.info(f"Deleted: {record.alias} {kind} {remote}")
        return 0

    return run_in_workspace(args, run)
