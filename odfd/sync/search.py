"""Finding datasets by name on named repositories (``odfd search``): each repository lists its
datasets through its transport (an odfd node's JSON listing at ``/`` for ``http(s)://``, the
dataset folders of a ``file://`` one or under an S3 prefix, each folder with a ``refs/head``)."""

from __future__ import annotations

from dataclasses import dataclass

from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.url import parse_remote


@dataclass(frozen=True, slots=True)
class Found:
    """A dataset whose name matched, where it was found."""

    repo: str
    """The repository's name; ``(local)`` for this workspace."""
    alias: str
    kind: str | None
    """``None`` when the repository's listing does not say."""
    url: str
    """Where to pull it from (a local dataset: its id)."""


async def search_repo(
    name: str, base: str, query: str, settings: TransportSettings = TransportSettings()
) -> list[Found]:
    """The datasets of repository ``name`` (at ``base``) whose alias contains ``query``."""
    needle = query.lower()
    return [
        Found(name, listed.alias, listed.kind, listed.url)
        for listed in await parse_remote(base, settings).list_datasets()
        if needle in listed.alias.lower()
    ]
