"""What the read-only remote stores (HTTP, IPFS) share: refusing writes, their error types.

A remote dataset is read through the same ``ObjectStore`` / ``RefStore`` interfaces as a local
one, so replication walks any source the same way. Nothing read from a remote is trusted: the
stores hand out raw bytes and the sync layer checks every hash and size.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path

from protocol.identity import Multihash
from storage.errors import StorageError
from storage.stores.base import Chunk, NamedStore, ObjectStore, RefStore


class RemoteStoreError(StorageError):
    """A remote store answered with an error or could not be reached."""


class RemoteStatusError(RemoteStoreError):
    """A remote answered an HTTP error status (``status``), after retries for 5xx."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RemoteUnavailableError(RemoteStoreError):
    """Nothing answers at the remote's address (connection refused, DNS, timeout)."""


class ReadOnlyStoreError(StorageError):
    """A write was attempted on a store that can only be read."""


class ReadOnlyObjectStore(ObjectStore):
    """An object store served by a peer: reads only, no listing."""

    def _refuse(self, what: str) -> StorageError:
        return ReadOnlyStoreError(f"{self!r} is read-only: cannot {what}")

    async def put_bytes(self, data: bytes, expected: Multihash | None = None) -> Multihash:
        raise self._refuse("store objects")

    async def put_file(
        self, path: Path, expected: Multihash | None = None, *, move: bool = False
    ) -> Multihash:
        raise self._refuse("store objects")

    async def put_stream(
        self, chunks: AsyncIterable[Chunk], expected: Multihash | None = None
    ) -> Multihash:
        raise self._refuse("store objects")

    async def delete(self, hash: Multihash) -> None:
        raise self._refuse("delete objects")

    def iter_hashes(self) -> AsyncIterator[Multihash]:
        raise self._refuse("list objects (the Simple Transfer Protocol has no listing)")


class ReadOnlyRefStore(RefStore):
    async def set(self, name: str, new: Multihash, *, expected: Multihash | None) -> None:
        raise ReadOnlyStoreError(f"{self!r} is read-only: cannot move ref {name}")

    async def delete(self, name: str, *, expected: Multihash | None) -> None:
        raise ReadOnlyStoreError(f"{self!r} is read-only: cannot delete ref {name}")

    async def names(self) -> list[str]:
        return ["head"]


class AbsentNamedStore(NamedStore):
    """``info/`` of a remote dataset: the transfer protocols do not serve it."""

    async def get(self, name: str) -> bytes | None:
        return None

    async def set(self, name: str, data: bytes) -> None:
        raise ReadOnlyStoreError(f"a remote dataset's info/{name} cannot be written")

    async def delete(self, name: str) -> None:
        raise ReadOnlyStoreError(f"a remote dataset's info/{name} cannot be deleted")
