"""A workspace's datasets as folders in its ``datasets/`` folder (the default storage)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from protocol.errors import ParseError
from protocol.identity import DatasetId
from storage.atomic import fsync_dir
from storage.chain.metadata_chain import HeadListener
from storage.chain.saved_state import SavedStateStore
from storage.dataset import Dataset
from storage.dataset_storage import StoredDataset
from storage.errors import DatasetExistsError
from storage.layout import HEAD_REF, DatasetLayout, dataset_dir_name


class LocalDatasetStorage:
    """One folder per dataset, named by its id, in the spec's layout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = str(root)

    def layout(self, dataset_id: DatasetId) -> DatasetLayout:
        return DatasetLayout(self.root / dataset_dir_name(dataset_id))

    def open(
        self,
        dataset_id: DatasetId,
        *,
        on_head_moved: HeadListener | None = None,
        saved_states: SavedStateStore | None = None,
        staging: Callable[[], Path] | None = None,
    ) -> Dataset:
        return Dataset.open_local(
            self.layout(dataset_id).root,
            dataset_id,
            on_head_moved=on_head_moved,
            saved_states=saved_states,
            staging=staging,
        )

    def where(self, dataset_id: DatasetId, name: str = "") -> str:
        root = self.layout(dataset_id).root
        return str(root / name if name else root)

    async def check(self) -> None:
        return None

    async def prepare(self, dataset_id: DatasetId) -> None:
        await asyncio.to_thread(self.layout(dataset_id).create)

    async def exists(self, dataset_id: DatasetId) -> bool:
        return await asyncio.to_thread(self.layout(dataset_id).root.exists)

    async def has_head(self, dataset_id: DatasetId) -> bool:
        return await asyncio.to_thread((self.layout(dataset_id).refs_dir / HEAD_REF).exists)

    async def scan(self) -> list[StoredDataset]:
        return await asyncio.to_thread(self._scan)

    def _scan(self) -> list[StoredDataset]:
        if not self.root.is_dir():
            return []
        found = []
        for folder in sorted(self.root.iterdir()):
            if folder.name.startswith("."):
                continue
            try:
                dataset_id: DatasetId | None = DatasetId.from_multibase(folder.name)
            except ParseError:
                dataset_id = None
            found.append(StoredDataset(str(folder), dataset_id))
        return found

    async def remove(self, dataset_id: DatasetId) -> None:
        await asyncio.to_thread(remove_dataset_folder, self.layout(dataset_id))

    async def adopt(self, staged: DatasetLayout, dataset_id: DatasetId) -> None:
        """Renames the staged folder into place (leftovers of an unfinished dataset replaced)."""
        await asyncio.to_thread(
            self._move_into_place, staged.root, self.layout(dataset_id), dataset_id
        )
        await asyncio.to_thread(fsync_dir, self.root)

    @staticmethod
    def _move_into_place(staging: Path, final: DatasetLayout, dataset_id: DatasetId) -> None:
        if final.root.exists():
            if (final.refs_dir / HEAD_REF).exists():
                raise DatasetExistsError(
                    f"{final.root} already holds dataset {dataset_id} "
                    "(not in the catalog: run `odfd repair`)"
                )
            shutil.rmtree(final.root)
        try:
            os.rename(staging, final.root)
        except OSError as err:  # another pull or push put the dataset in place first
            raise DatasetExistsError(
                f"{final.root} appeared while committing dataset {dataset_id}: {err}"
            ) from None


def remove_dataset_folder(layout: DatasetLayout) -> None:
    """``refs/head`` first (durably), then the rest (blocking)."""
    (layout.refs_dir / HEAD_REF).unlink(missing_ok=True)
    if layout.refs_dir.is_dir():
        fsync_dir(layout.refs_dir)
    shutil.rmtree(layout.root, ignore_errors=True)
