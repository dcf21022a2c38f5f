"""``s3://bucket/prefix`` and ``s3+http(s)://host[:port]/bucket/prefix``: a dataset folder under
a bucket's key prefix (or, for ``odfd search``, a prefix of dataset folders), read and written
with the node's S3 settings (credentials, and the endpoint of an ``s3://`` URL:
``storage.s3_settings``). ``obstore`` is imported only when a bucket is reached (~0.1 s)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from odfd.sync.transport.base import Listed, RemoteView, SmartEndpoint, SourceHead, name_from_url
from protocol.identity import DatasetId, DatasetName
from storage.layout import ALIAS_INFO, HEAD_REF
from storage.s3_settings import S3Location, S3Settings

if TYPE_CHECKING:
    import aiohttp

    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget
    from storage.dataset import Dataset


@dataclass(frozen=True, slots=True)
class S3Transport:
    location: S3Location
    settings: S3Settings

    @property
    def url(self) -> str:
        return self.location.url.rstrip("/")

    @property
    def smart(self) -> SmartEndpoint | None:
        return None

    def default_name(self) -> DatasetName | None:
        return name_from_url(self.url)

    def peer_key(self) -> str:
        """The server of an explicit endpoint (``host:port``); every other bucket is reached
        through the one endpoint the environment names, or AWS."""
        if self.location.endpoint is None:
            return "s3"
        parts = urlsplit(self.location.endpoint)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = 0  # a bad port: reaching the bucket reports it
        return f"{(parts.hostname or '').lower()}:{port}"

    async def dataset(self, dataset_id: DatasetId | None = None) -> Dataset:
        """The dataset folder, once the bucket answers (a missing bucket or refused credentials
        are reported as such, not as a missing dataset)."""
        from storage.s3_client import S3Bucket
        from storage.stores.s3 import s3_dataset

        bucket = S3Bucket(self.location, self.settings)
        await bucket.check_bucket()
        return s3_dataset(bucket, self.location, dataset_id)

    @asynccontextmanager
    async def open(self, session: aiohttp.ClientSession) -> AsyncIterator[RemoteView]:
        from odfd.sync.objects import store_source

        dataset = await self.dataset()
        yield RemoteView(dataset, self.url, store_source(dataset), lists_blocks=True)

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        from odfd.sync.transport.probe import probe_view

        return await probe_view(self.open(session), self.url, known)

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.folder_push import push_into_folder

        dest = await self.dataset(target.record.id if target.record else None)
        return await push_into_folder(target, dest, self.url, options, progress)

    async def list_datasets(self) -> list[Listed]:
        """The folders under the prefix that hold a ``refs/head``."""
        from storage.s3_client import S3Bucket

        bucket = S3Bucket(self.location, self.settings)
        prefix = self.location.prefix
        found = []
        for folder in sorted(await bucket.list_folders(prefix)):
            name = folder[len(prefix) :].strip("/")
            if await bucket.head(f"{folder}refs/{HEAD_REF}") is None:
                continue
            alias_file = await bucket.get(f"{folder}info/{ALIAS_INFO}")
            alias = alias_file[0].decode("utf-8", "replace").strip() if alias_file else name
            found.append(Listed(alias, None, f"{self.url}/{name}"))
        return found
