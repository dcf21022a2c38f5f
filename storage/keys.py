"""Per-dataset ed25519 private keys, kept outside the dataset folders.

A key file is the raw 32-byte ed25519 seed, created with mode 0600 inside a 0700 folder, and
never passes through a file with wider permissions. Dataset folders can be shared or served as
they are because no secret lives in them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.identity import DatasetId
from storage.atomic import fsync_dir
from storage.errors import StorageError
from storage.layout import dataset_dir_name

if TYPE_CHECKING:
    from nacl.signing import SigningKey


class KeyStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, dataset_id: DatasetId) -> Path:
        return self.root / f"{dataset_dir_name(dataset_id)}.key"

    def save(self, dataset_id: DatasetId, key: SigningKey) -> Path:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        path = self.path_of(dataset_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, bytes(key))
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.root)
        return path

    def load(self, dataset_id: DatasetId) -> SigningKey | None:
        path = self.path_of(dataset_id)
        try:
            seed = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(seed) != 32:
            raise StorageError(
                f"key file {path} must hold a 32-byte ed25519 seed, has {len(seed)} bytes"
            )
        from nacl.signing import SigningKey  # here: reading datasets needs no nacl

        return SigningKey(seed)

    def delete(self, dataset_id: DatasetId) -> None:
        self.path_of(dataset_id).unlink(missing_ok=True)
