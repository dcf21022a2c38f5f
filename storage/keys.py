"""Ed25519 private keys, kept outside the dataset folders: one per dataset, and the node's own
identity key (``node.key``), which signs the node's answers to queries.

A key file is the raw 32-byte ed25519 seed, created with mode 0600 inside a 0700 folder, and
never passes through a file with wider permissions. Dataset folders can be shared or served as
they are because no secret lives in them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.identity import DatasetId, DidKey
from protocol.identity.signature import parse_private_key
from storage.atomic import fsync_dir
from storage.errors import StorageError
from storage.layout import dataset_dir_name

if TYPE_CHECKING:
    from nacl.signing import SigningKey

NODE_KEY_FILE = "node.key"
"""The node's identity key in the keys folder (dataset keys are named by dataset id)."""
_SEED_SIZE = 32


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

    @property
    def node_key_path(self) -> Path:
        return self.root / NODE_KEY_FILE

    def load_node_key(self) -> SigningKey | None:
        """The node's identity key, ``None`` if it has none yet."""
        if not self.node_key_path.exists():
            return None
        return load_signing_key(self.node_key_path)

    def node_key(self) -> SigningKey:
        """The node's identity key, created on first use (safe against concurrent creators:
        the file appears complete or not at all)."""
        existing = self.load_node_key()
        if existing is not None:
            return existing
        from nacl.signing import SigningKey

        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        staged = self.root / f".{NODE_KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                os.write(fd, bytes(SigningKey.generate()))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(staged, self.node_key_path)
            except FileExistsError:
                pass  # another process published its key first: use that one
            fsync_dir(self.root)
        finally:
            staged.unlink(missing_ok=True)
        return load_signing_key(self.node_key_path)


def load_signing_key(path: Path) -> SigningKey:
    """An ed25519 key from a file: the raw 32-byte seed (as odfd writes them) or the
    reference's text form, a multibase-encoded seed (``u…``)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise StorageError(f"cannot read key file {path}: {error.strerror}") from None
    if len(data) == _SEED_SIZE:
        seed = data
    else:
        try:
            seed = parse_private_key(data.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as error:
            raise StorageError(
                f"key file {path} holds neither a 32-byte ed25519 seed nor a multibase "
                f"private key ({len(data)} bytes; {error})"
            ) from None
    from nacl.signing import SigningKey

    return SigningKey(seed)


def did_of(key: SigningKey) -> DidKey:
    """The ``did:key`` that names a key's public half (published, e.g. in ``/info``)."""
    return DidKey(bytes(key.verify_key))
