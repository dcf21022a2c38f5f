"""Named remote repositories (a name for a URL datasets live under) and a dataset's remote
aliases (the remotes it pulls from and pushes to, kept in its ``info/config`` as the reference
keeps them, and in the catalog)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odfd.sync.repos import RepoError, check_name, check_url, expand
from odfd.sync.transport.url import canonical_url
from storage.errors import DatasetExistsError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord
    from storage.catalog.catalog import RemoteAliasKind
    from storage.workspace import Workspace

KINDS: tuple[RemoteAliasKind, ...] = ("pull", "push")


async def add_repo(node: Node, name: str, url: str) -> tuple[str, str]:
    """The repository's checked name and URL, once recorded."""
    name, url = check_name(name), check_url(url)
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


async def list_aliases(node: Node, dataset: str | None) -> list[tuple[str, RemoteAliasKind, str]]:
    """``(dataset alias, kind, remote)`` of one dataset's remotes, or every dataset's."""
    workspace = node.workspace
    records = [await workspace.resolve(dataset)] if dataset else await workspace.list_datasets()
    rows: list[tuple[str, RemoteAliasKind, str]] = []
    for record in records:
        aliases = await workspace.open_dataset(record.id).remote_aliases()
        for kind in KINDS:
            rows += [(record.alias, kind, ref) for ref in aliases[kind]]
    return rows


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
