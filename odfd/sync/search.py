"""Finding datasets by name on named repositories (``odfd search``): an odfd node's JSON listing
at ``/`` for ``http(s)://`` repositories, the dataset folders of a ``file://`` one or under an S3
repository's key prefix (each folder with a ``refs/head``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from odfd.sync.errors import SyncError
from odfd.sync.remote_url import parse_remote_url
from odfd.sync.repos import join
from storage.layout import ALIAS_INFO, HEAD_REF, DatasetLayout
from storage.s3_settings import S3Location, S3Settings

LISTING_TIMEOUT = 30.0
"""Seconds a repository may take to send its listing."""


@dataclass(frozen=True, slots=True)
class Found:
    repo: str
    alias: str
    kind: str | None
    url: str


async def search_repo(
    name: str, base: str, query: str, s3: S3Settings | None = None
) -> list[Found]:
    remote = parse_remote_url(base)
    if remote.scheme in ("http", "https"):
        entries = await _http_listing(remote.http_base)
    elif remote.scheme == "file":
        entries = await asyncio.to_thread(_folder_listing, remote.path, base)
    elif remote.scheme == "s3":
        entries = await _s3_listing(remote.s3, s3, base)
    else:
        raise SyncError(f"repository {name} ({base}): searching {remote.scheme}:// is not possible")
    needle = query.lower()
    return [
        Found(name, alias, kind, url) for alias, kind, url in entries if needle in alias.lower()
    ]


async def _http_listing(base: str) -> list[tuple[str, str | None, str]]:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=LISTING_TIMEOUT)) as session,
            session.get(base) as response,
        ):
            if response.status != 200:
                raise SyncError(f"{base}: HTTP {response.status} for the dataset listing")
            document = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as err:
        raise SyncError(
            f"{base}: cannot read the dataset listing: {err or type(err).__name__}"
        ) from None
    datasets = document.get("datasets") if isinstance(document, dict) else None
    if not isinstance(datasets, list):
        raise SyncError(f"{base}: the answer is not an odfd dataset listing")
    return [
        (str(d["alias"]), d.get("kind"), str(d.get("url") or join(base, str(d["alias"]))))
        for d in datasets
        if isinstance(d, dict) and "alias" in d
    ]


async def _s3_listing(
    location: S3Location, settings: S3Settings | None, base: str
) -> list[tuple[str, str | None, str]]:
    from storage.s3_client import S3Bucket  # obstore takes ~0.1 s to import: only when used

    bucket = S3Bucket(location, settings)
    found: list[tuple[str, str | None, str]] = []
    for folder in sorted(await bucket.list_folders(location.prefix)):
        name = folder[len(location.prefix) :].strip("/")
        if await bucket.head(f"{folder}refs/{HEAD_REF}") is None:
            continue
        alias_file = await bucket.get(f"{folder}info/{ALIAS_INFO}")
        alias = alias_file[0].decode("utf-8", "replace").strip() if alias_file else name
        found.append((alias, None, join(base, name)))
    return found


def _folder_listing(root: Path, base: str) -> list[tuple[str, str | None, str]]:
    if not root.is_dir():
        raise SyncError(f"{base}: no such folder")
    found: list[tuple[str, str | None, str]] = []
    for folder in sorted(root.iterdir()):
        layout = DatasetLayout(folder)
        if not layout.looks_like_dataset():
            continue
        alias_file = layout.info_dir / ALIAS_INFO
        alias = alias_file.read_text().strip() if alias_file.is_file() else folder.name
        found.append((alias, None, join(base, folder.name)))
    return found
