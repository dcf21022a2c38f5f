"""Where a workspace keeps its datasets: the seam between the workspace and its storage.

A node keeps every dataset in the spec's layout, one folder (or key prefix) per dataset named by
its id. ``LocalDatasetStorage`` (``storage.local_storage``) is the workspace's ``datasets/``
folder; ``S3DatasetStorage`` (``storage.s3_storage``) a prefix of an S3 bucket. The workspace
and everything above it open, list, create, remove and commit datasets through this protocol
only, so the catalog (an index, always local) never depends on where the bytes live.

Engines and the verifier read data slices and checkpoints by path: ``local_file`` gives one for
an object of any dataset (a bucket's objects come through the workspace's read-through cache,
``storage.object_cache``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from protocol.identity import DatasetId, Multihash
from storage.chain.metadata_chain import HeadListener
from storage.chain.saved_state import SavedStateStore
from storage.dataset import Dataset
from storage.errors import StorageError
from storage.layout import DatasetLayout
from storage.stores.base import ObjectStore


@dataclass(frozen=True, slots=True)
class StoredDataset:
    """A dataset found by listing a storage: its id (``None`` when the folder's name is not one)
    and where it is (for messages)."""

    where: str
    dataset_id: DatasetId | None


class DatasetStorage(Protocol):
    """The datasets of one workspace, in the spec's layout, one per dataset id."""

    url: str
    """Where the datasets are (a folder or an ``s3…://`` URL), for messages."""

    def open(
        self,
        dataset_id: DatasetId,
        *,
        on_head_moved: HeadListener | None = None,
        saved_states: SavedStateStore | None = None,
        staging: Callable[[], Path] | None = None,
    ) -> Dataset:
        """The dataset's stores (it may not exist yet: then it has no ``refs/head``)."""

    def where(self, dataset_id: DatasetId, name: str = "") -> str:
        """The dataset's location (or that of ``name`` inside it, e.g. ``refs/head.sig``)."""

    async def check(self) -> None:
        """Raise a one-line ``StorageError`` if the storage cannot be used (missing bucket,
        refused credentials); called once when a node starts."""

    async def prepare(self, dataset_id: DatasetId) -> None:
        """Make room for a new dataset (its folders), before its first commit."""

    async def exists(self, dataset_id: DatasetId) -> bool:
        """Whether anything of the dataset is stored (a head or leftovers of an unfinished one)."""

    async def has_head(self, dataset_id: DatasetId) -> bool: ...

    async def scan(self) -> list[StoredDataset]:
        """Every dataset folder (with or without a head), sorted by location."""

    async def remove(self, dataset_id: DatasetId) -> None:
        """Delete the dataset: ``refs/head`` first, so an interrupted delete leaves a headless
        dataset every listing skips."""

    async def adopt(self, staged: DatasetLayout, dataset_id: DatasetId) -> None:
        """Make a complete dataset assembled in a local folder (a first pull, an import, a
        pushed dataset) the stored dataset ``dataset_id``: its head appears last.
        ``DatasetExistsError`` if the dataset already has a head. The folder is consumed."""


@runtime_checkable
class LocalFiles(Protocol):
    """An object store that can hand its objects to engines as local files."""

    def path_of(self, hash: Multihash) -> Path:
        """Where the object's file is (or would be), without any I/O."""

    async def local_file(self, hash: Multihash) -> Path:
        """The object's local file, fetched first if need be (``ObjectNotFoundError`` if the
        object is not stored)."""


async def local_file(store: ObjectStore, hash: Multihash) -> Path:
    """A local file holding object ``hash`` of ``store`` (engines and checks read by path)."""
    if not isinstance(store, LocalFiles):
        raise StorageError(f"{store!r} cannot hand its objects out as local files")
    return await store.local_file(hash)


async def local_files(store: ObjectStore, hashes: list[Multihash]) -> list[Path]:
    """``local_file`` of each of ``hashes`` (a few fetched at once), in their order."""
    limit = asyncio.Semaphore(_PARALLEL_FETCHES)

    async def one(hash: Multihash) -> Path:
        async with limit:
            return await local_file(store, hash)

    return list(await asyncio.gather(*(one(hash) for hash in hashes)))


_PARALLEL_FETCHES = 4
