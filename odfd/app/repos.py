"""Named remote repositories (a name for a URL datasets live under) and a dataset's remote
aliases (the remotes it pulls from and pushes to, kept in its ``info/config`` as the reference
keeps them, and in the catalog)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.sync.repos import RepoError, check_name, check_url, expand
from odfd.sync.transport.url import canonical_url
from storage.errors import DatasetExistsError

if TYPE_CHECKING:
    from datetime import datetime

    from odfd.app.node import Node
    from protocol.identity import Multihash
    from storage.catalog import DatasetRecord
    from storage.catalog.catalog import RemoteAliasKind
    from storage.workspace import Workspace

KINDS: tuple[RemoteAliasKind, ...] = ("pull", "push")


def checked_repo(name: str, url: str) -> tuple[str, str]:
    """A repository's name and URL, checked before anything opens (``RepoError`` naming the
    bad one)."""
    return check_name(name), check_url(url)


def chosen_repos(names: list[str], every: bool) -> list[str] | None:
    """The repositories ``odfd repo delete`` forgets (``None``: every one); naming some and
    passing ``every``, or neither, is a ``RepoError``."""
    if bool(names) == every:
        raise RepoError("name the repositories to delete, or pass --all (not both)")
    return None if every else names


def chosen_remote(remote: str | None, every: bool) -> str | None:
    """The remote ``odfd repo alias delete`` removes (``None``: every one); naming one and
    passing ``every``, or neither, is a ``RepoError``."""
    if (remote is None) != every:
        raise RepoError("name the remote to delete, or pass --all (not both)")
    return None if every else remote


async def add_repo(node: Node, name: str, url: str) -> tuple[str, str]:
    """The repository's checked name and URL, once recorded."""
    name, url = checked_repo(name, url)
    try:
        await node.workspace.catalog.add_remote(name, url)
    except DatasetExistsError:
        raise RepoError(f"a repository named {name} exists already (`odfd repo list`)") from None
    return name, url


async def list_repos(node: Node) -> list[tuple[str, str]]:
    return list(await node.workspace.catalog.list_remotes())


async def delete_repos(node: Node, names: list[str] | None) -> list[str]:
    """Forgets the named repositories (``None``: every one), all or none."""
    catalog = node.workspace.catalog
    known = dict(await catalog.list_remotes())
    chosen = list(known) if names is None else names
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise RepoError(f"no repository named {', '.join(unknown)}; nothing was deleted")
    for name in chosen:
        await catalog.remove_remote(name)
    return chosen


async def _set(
    workspace: Workspace, record: DatasetRecord, kind: RemoteAliasKind, refs: list[str]
) -> None:
    """Both places the reference's layout and odfd keep remote aliases in."""
    await workspace.open_dataset(record.id).set_remote_aliases(kind, refs)
    await workspace.catalog.set_remote_aliases(record.id, kind, refs)


async def add_alias(
    node: Node, dataset: str, remote: str, kind: RemoteAliasKind
) -> tuple[DatasetRecord, str, bool]:
    """Adds a pull or push remote (a URL or ``REPO/NAME``) to a dataset: the dataset, the remote
    as recorded, and whether it was new."""
    workspace = node.workspace
    record = await workspace.resolve(dataset)
    url = check_url(await expand(workspace, remote))
    refs = (await workspace.open_dataset(record.id).remote_aliases())[kind]
    text = canonical_url(url)
    if text in refs:
        return record, text, False
    await _set(workspace, record, kind, [*refs, text])
    return record, text, True


@dataclass(frozen=True, slots=True)
class RemoteEntry:
    """One of a dataset's remotes, with the head both sides last had after a pull or push
    between them and when (``None``: not synced since it was added)."""

    dataset: str
    kind: RemoteAliasKind
    remote: str
    synced_head: Multihash | None
    synced_at: datetime | None


async def list_aliases(node: Node, dataset: str | None) -> list[RemoteEntry]:
    """One dataset's remotes, or every dataset's, each with its last sync."""
    workspace = node.workspace
    if dataset:
        record = await workspace.resolve(dataset)
        records, states = [record], await workspace.catalog.sync_states(record.id)
    else:
        records, states = await workspace.list_datasets(), await workspace.catalog.sync_states()
    synced = {(state.dataset_id, state.remote): state for state in states}
    entries: list[RemoteEntry] = []
    for record in records:
        aliases = await workspace.open_dataset(record.id).remote_aliases()
        for kind in KINDS:
            for ref in aliases[kind]:
                state = synced.get((record.id, ref))
                entries.append(
                    RemoteEntry(
                        record.alias,
                        kind,
                        ref,
                        None if state is None else state.last_synced_local_head,
                        None if state is None else state.last_synced_at,
                    )
                )
    return entries


async def delete_alias(
    node: Node, dataset: str, remote: str | None, kinds: tuple[RemoteAliasKind, ...]
) -> tuple[DatasetRecord, str | None]:
    """Removes ``remote`` from the dataset's remotes of ``kinds[0]``, or (``remote`` is
    ``None``) every remote of ``kinds``: the dataset and the remote as recorded."""
    workspace = node.workspace
    record = await workspace.resolve(dataset)
    if remote is None:
        for kind in kinds:
            await _set(workspace, record, kind, [])
        return record, None
    aliases = await workspace.open_dataset(record.id).remote_aliases()
    text = canonical_url(await expand(workspace, remote))
    kind = kinds[0]
    if text not in aliases[kind]:
        raise RepoError(f"{record.alias} has no {kind} remote {text} (`odfd repo alias list`)")
    await _set(workspace, record, kind, [r for r in aliases[kind] if r != text])
    return record, text
