"""A workspace's datasets in an S3 bucket: one key prefix per dataset, named by its id, in the
spec's layout (the same keys as an S3 remote, ``storage.stores.s3``).

Blocks, refs and ``info/`` are read from and written to the bucket; data slices and checkpoints
go through the workspace's ``ObjectCache`` (engines read files). ``refs/head`` moves by the
server's conditional writes, so of two nodes (or processes) writing one dataset exactly one head
wins and the other gets ``RefCasError`` ("another write won"); objects and blocks are uploaded
before the head names them, so no head ever names a missing object.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multihash
from storage.chain.metadata_chain import HeadListener
from storage.chain.saved_state import SavedStateStore
from storage.dataset import Dataset
from storage.dataset_storage import StoredDataset
from storage.errors import DatasetExistsError, RefCasError, StorageError
from storage.layout import HEAD_REF, DatasetLayout, dataset_dir_name
from storage.object_cache import CachedObjectStore, ObjectCache
from storage.s3_client import S3Bucket
from storage.s3_settings import S3Location
from storage.stores.base import ObjectStore
from storage.stores.s3 import S3NamedStore, S3ObjectStore, S3RefStore

_PARALLEL_UPLOADS = 4


class S3StorageError(StorageError):
    """The workspace's bucket cannot be used (the message names ``[storage] url``)."""


class S3DatasetStorage:
    """One key prefix per dataset below ``location`` in ``bucket``."""

    def __init__(self, bucket: S3Bucket, location: S3Location, cache: ObjectCache) -> None:
        self.bucket = bucket
        self.location = location
        self.cache = cache
        self.url = location.url

    def location_of(self, dataset_id: DatasetId) -> S3Location:
        return self.location.child(dataset_dir_name(dataset_id))

    def open(
        self,
        dataset_id: DatasetId,
        *,
        on_head_moved: HeadListener | None = None,
        saved_states: SavedStateStore | None = None,
        staging: Callable[[], Path] | None = None,
    ) -> Dataset:
        """Data and checkpoints through the cache (new ones staged in ``staging()``)."""
        location = self.location_of(dataset_id)
        return Dataset(
            blocks=S3ObjectStore(self.bucket, location, "blocks"),
            data=CachedObjectStore(
                S3ObjectStore(self.bucket, location, "data"), self.cache, staging
            ),
            checkpoints=CachedObjectStore(
                S3ObjectStore(self.bucket, location, "checkpoints"), self.cache, staging
            ),
            refs=S3RefStore(self.bucket, location),
            info=S3NamedStore(self.bucket, location),
            dataset_id=dataset_id,
            on_head_moved=on_head_moved,
            saved_states=saved_states,
        )

    def where(self, dataset_id: DatasetId, name: str = "") -> str:
        return f"{self.location_of(dataset_id).url}{name}"

    async def check(self) -> None:
        try:
            await self.bucket.check_bucket()
        except StorageError as err:
            raise S3StorageError(f"[storage] url {self.url}: {err}") from None

    async def prepare(self, dataset_id: DatasetId) -> None:
        return None  # a prefix needs no creating

    async def exists(self, dataset_id: DatasetId) -> bool:
        async for _ in self.bucket.list_keys(self.location_of(dataset_id).prefix):
            return True
        return False

    async def has_head(self, dataset_id: DatasetId) -> bool:
        key = self.location_of(dataset_id).key(f"refs/{HEAD_REF}")
        return await self.bucket.head(key) is not None

    async def scan(self) -> list[StoredDataset]:
        found = []
        for folder in await self.bucket.list_folders(self.location.prefix):
            name = folder[len(self.location.prefix) :].strip("/")
            try:
                dataset_id: DatasetId | None = DatasetId.from_multibase(name)
            except ParseError:
                dataset_id = None
            found.append(StoredDataset(self.location.child(name).url, dataset_id))
        return sorted(found, key=lambda s: s.where)

    async def remove(self, dataset_id: DatasetId) -> None:
        location = self.location_of(dataset_id)
        await self.bucket.delete(location.key(f"refs/{HEAD_REF}"))
        keys = [key async for key in self.bucket.list_keys(location.prefix)]
        await _bounded(self.bucket.delete(key) for key in keys)

    async def adopt(self, staged: DatasetLayout, dataset_id: DatasetId) -> None:
        """Uploads the staged dataset: data and checkpoints (through the cache), blocks,
        ``info/``, the signed head, and ``refs/head`` last by a conditional create."""
        if await self.has_head(dataset_id):
            raise DatasetExistsError(f"{self.where(dataset_id)} already holds dataset {dataset_id}")
        target = self.open(dataset_id)
        source = Dataset.open_local(staged.root, dataset_id)
        head = await source.chain.head()
        if head is None:
            raise StorageError(f"{staged.root}: a staged dataset without refs/{HEAD_REF}")
        for folder, store in (
            (staged.data_dir, target.data),
            (staged.checkpoints_dir, target.checkpoints),
        ):
            await _bounded(_move_object(store, path) for path in await _objects_in(folder))
        blocks = await _objects_in(staged.blocks_dir)
        contents = await asyncio.to_thread(lambda: [path.read_bytes() for path in blocks])
        await target.blocks.put_many(contents)
        for path in await _objects_in(staged.info_dir):
            await target.info.set(path.name, await asyncio.to_thread(path.read_bytes))
        signature = await source.refs.get_signature(HEAD_REF)
        if signature is not None:
            await target.refs.set_signature(HEAD_REF, signature)
        try:
            await target.refs.set(HEAD_REF, head, expected=None)
        except RefCasError:
            raise DatasetExistsError(
                f"{self.where(dataset_id)} got dataset {dataset_id} from another writer meanwhile"
            ) from None
        await asyncio.to_thread(shutil.rmtree, staged.root, ignore_errors=True)


async def _objects_in(folder: Path) -> list[Path]:
    def scan() -> list[Path]:
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_file())

    return await asyncio.to_thread(scan)


async def _move_object(store: ObjectStore, path: Path) -> None:
    await store.put_file(path, Multihash.from_multibase(path.name), move=True)


async def _bounded(jobs: Iterable[Awaitable[None]]) -> None:
    """Runs ``jobs``, a few at once."""
    limit = asyncio.Semaphore(_PARALLEL_UPLOADS)

    async def one(job: Awaitable[None]) -> None:
        async with limit:
            await job

    await asyncio.gather(*(one(job) for job in jobs))
