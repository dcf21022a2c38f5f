"""Searching datasets by name: in this workspace and on the named repositories (``odfd repo
add``). A repository that cannot be searched is reported as an event and the others go on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Event, EventSink
from odfd.sync.errors import SyncError
from odfd.sync.repos import RepoError
from protocol.errors import OdfError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.sync.search import Found


@dataclass(frozen=True, slots=True)
class RepoSearchFailed(Event):
    name: ClassVar[str] = "repoSearchFailed"
    repo: str
    error: str


async def search(
    node: Node,
    query: str,
    *,
    local_only: bool,
    repos: list[str] | None,
    sink: EventSink,
) -> tuple[list[Found], int]:
    """Datasets whose name contains ``query`` (case-insensitively): this workspace's unless
    ``repos`` names repositories, then those of every named repository (or of ``repos``) unless
    ``local_only``; with the number of repositories that could not be searched."""
    from odfd.sync.search import Found, search_repo

    workspace = node.workspace
    needle = query.lower()
    found: list[Found] = []
    if repos is None:
        for record in await workspace.list_datasets():
            if needle in record.alias.lower():
                found.append(Found("(local)", record.alias, record.kind.value, str(record.id)))
    failed = 0
    if not local_only:
        known = dict(await workspace.catalog.list_remotes())
        names = repos if repos is not None else list(known)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise RepoError(f"no repository named {', '.join(unknown)} (`odfd repo list`)")
        for name in names:
            try:
                hits = await search_repo(name, known[name], query, node.transport)
            except (SyncError, OdfError) as err:
                sink.emit(RepoSearchFailed(name, str(err)))
                failed += 1
                continue
            found += hits
    return found, failed
