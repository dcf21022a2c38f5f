"""Datasets kept on other storages than the workspace's own: RFC-018 ``PersistentVolume``s.

A :class:`PlacedStorage` is a ``DatasetStorage`` that sends each dataset to the storage it was
placed on when created (a volume: a bucket prefix) and every other dataset to the workspace's
own storage. Placements are the truth of where a dataset's bytes are, so they are kept in a file
of the workspace (``volumes.json``: dataset id → volume id), written atomically before the
dataset's first byte; the volumes themselves (where, with which credentials) are given by the
node when it opens the workspace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from protocol.identity import DatasetId
from storage.atomic import write_file_atomic
from storage.chain.metadata_chain import HeadListener
from storage.chain.saved_state import SavedStateStore
from storage.dataset import Dataset
from storage.dataset_storage import DatasetStorage, StoredDataset
from storage.errors import StorageError
from storage.layout import DatasetLayout

PLACEMENTS_FILE = "volumes.json"


class VolumeUnavailableError(StorageError):
    """A dataset is placed on a volume this node cannot reach now (not defined, or failing)."""


def read_placements(root: Path) -> dict[str, str]:
    """``dataset id → volume id`` of the workspace at ``root`` (empty when none was placed)."""
    path = root / PLACEMENTS_FILE
    if not path.exists():
        return {}
    try:
        found = json.loads(path.read_text())
    except ValueError as err:
        raise StorageError(f"{path}: not JSON: {err}") from None
    if not isinstance(found, dict):
        raise StorageError(f"{path}: expected a map of dataset ids to volume ids")
    return {str(k): str(v) for k, v in found.items()}


class PlacedStorage:
    def __init__(
        self, root: Path, default: DatasetStorage, volumes: dict[str, DatasetStorage]
    ) -> None:
        self.root = root
        self.default = default
        self.volumes = dict(volumes)
        """Volume id → its storage (the volumes this node can reach)."""
        self.placements = read_placements(root)
        self.url = default.url

    def add_volume(self, volume_id: str, storage: DatasetStorage) -> None:
        self.volumes[volume_id] = storage

    def place(self, dataset_id: DatasetId, volume_id: str) -> None:
        """Put a new dataset on a volume (before anything of it is written)."""
        if volume_id not in self.volumes:
            raise VolumeUnavailableError(f"volume {volume_id} is not available on this node")
        self.placements[str(dataset_id)] = volume_id
        self._save()

    def volume_of(self, dataset_id: DatasetId) -> str | None:
        return self.placements.get(str(dataset_id))

    def _save(self) -> None:
        text = json.dumps(self.placements, indent=2, sort_keys=True) + "\n"
        write_file_atomic(self.root / PLACEMENTS_FILE, text.encode())

    def _of(self, dataset_id: DatasetId) -> DatasetStorage:
        volume = self.placements.get(str(dataset_id))
        if volume is None:
            return self.default
        found = self.volumes.get(volume)
        if found is None:
            raise VolumeUnavailableError(
                f"dataset {dataset_id} is on volume {volume}, which this node cannot reach "
                "(its PersistentVolume resource is missing or failing: see `odfd get "
                "persistentvolumes`)"
            )
        return found

    def open(
        self,
        dataset_id: DatasetId,
        *,
        on_head_moved: HeadListener | None = None,
        saved_states: SavedStateStore | None = None,
        staging: Callable[[], Path] | None = None,
    ) -> Dataset:
        return self._of(dataset_id).open(
            dataset_id, on_head_moved=on_head_moved, saved_states=saved_states, staging=staging
        )

    def where(self, dataset_id: DatasetId, name: str = "") -> str:
        return self._of(dataset_id).where(dataset_id, name)

    async def check(self) -> None:
        await self.default.check()
        for storage in self.volumes.values():
            await storage.check()

    async def prepare(self, dataset_id: DatasetId) -> None:
        await self._of(dataset_id).prepare(dataset_id)

    async def exists(self, dataset_id: DatasetId) -> bool:
        return await self._of(dataset_id).exists(dataset_id)

    async def has_head(self, dataset_id: DatasetId) -> bool:
        return await self._of(dataset_id).has_head(dataset_id)

    async def scan(self) -> list[StoredDataset]:
        """The workspace's own datasets, and those placed on a volume this node reaches (a
        volume's bucket may hold other nodes' datasets: only ours are listed)."""
        found = list(await self.default.scan())
        for dataset_text, volume in sorted(self.placements.items()):
            storage = self.volumes.get(volume)
            dataset_id = DatasetId.parse(dataset_text)
            if storage is not None and await storage.exists(dataset_id):
                found.append(StoredDataset(storage.where(dataset_id), dataset_id))
        return found

    async def remove(self, dataset_id: DatasetId) -> None:
        await self._of(dataset_id).remove(dataset_id)
        if self.placements.pop(str(dataset_id), None) is not None:
            self._save()

    async def adopt(self, staged: DatasetLayout, dataset_id: DatasetId) -> None:
        await self._of(dataset_id).adopt(staged, dataset_id)
