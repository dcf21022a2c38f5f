"""In-memory implementations of the stores: a dataset that lives only as long as the process.

For tests that need a store but not a disk (and as the smallest reference of the contracts in
``base``): objects are checked against their hash like everywhere else, refs move only by
compare-and-swap. Each call completes without yielding to the event loop between its check and
its change, so compare-and-swap needs no lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path

from protocol.identity import Multihash
from storage.errors import HashMismatchError, ObjectNotFoundError, RefCasError
from storage.stores.base import Chunk, NamedStore, ObjectStore, RefStore


class MemoryObjectStore(ObjectStore):
    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self._objects: dict[Multihash, bytes] = {}

    def __repr__(self) -> str:
        return f"MemoryObjectStore({self.name!r})"

    async def contains(self, hash: Multihash) -> bool:
        return hash in self._objects

    async def size(self, hash: Multihash) -> int:
        return len(self._get(hash))

    async def get_bytes(self, hash: Multihash) -> bytes:
        return self._get(hash)

    async def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        data = self._get(hash)
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]

    async def put_bytes(self, data: bytes, expected: Multihash | None = None) -> Multihash:
        hash = Multihash.from_digest_sha3_256(data)
        if expected is not None and expected != hash:
            raise HashMismatchError(f"object for {self!r}", expected, hash)
        self._objects.setdefault(hash, bytes(data))
        return hash

    async def put_file(
        self, path: Path, expected: Multihash | None = None, *, move: bool = False
    ) -> Multihash:
        hash = await self.put_bytes(await asyncio.to_thread(Path(path).read_bytes), expected)
        if move:
            await asyncio.to_thread(Path(path).unlink)
        return hash

    async def put_stream(
        self, chunks: AsyncIterable[Chunk], expected: Multihash | None = None
    ) -> Multihash:
        return await self.put_bytes(b"".join([chunk async for chunk in chunks]), expected)

    async def delete(self, hash: Multihash) -> None:
        self._objects.pop(hash, None)

    async def iter_hashes(self) -> AsyncIterator[Multihash]:
        for hash in list(self._objects):
            yield hash

    def _get(self, hash: Multihash) -> bytes:
        try:
            return self._objects[hash]
        except KeyError:
            raise ObjectNotFoundError(repr(self), hash) from None


class MemoryRefStore(RefStore):
    def __init__(self, name: str = "memory") -> None:
        self.name = name
        self._refs: dict[str, Multihash] = {}

    def __repr__(self) -> str:
        return f"MemoryRefStore({self.name!r})"

    async def get(self, name: str) -> Multihash | None:
        return self._refs.get(name)

    async def set(self, name: str, new: Multihash, *, expected: Multihash | None) -> None:
        self._check(name, expected)
        self._refs[name] = new

    async def delete(self, name: str, *, expected: Multihash | None) -> None:
        self._check(name, expected)
        self._refs.pop(name, None)

    async def names(self) -> list[str]:
        return sorted(self._refs)

    def _check(self, name: str, expected: Multihash | None) -> None:
        actual = self._refs.get(name)
        if actual != expected:
            raise RefCasError(f"ref {name} of {self!r}", expected, actual)


class MemoryNamedStore(NamedStore):
    def __init__(self) -> None:
        self._files: dict[str, bytes] = {}

    async def get(self, name: str) -> bytes | None:
        return self._files.get(name)

    async def set(self, name: str, data: bytes) -> None:
        self._files[name] = bytes(data)

    async def delete(self, name: str) -> None:
        self._files.pop(name, None)
