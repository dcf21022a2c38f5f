"""A workspace's local read-through cache of data slices and checkpoints kept in a bucket.

Engines (Spark, DataFusion) and the verifier's file checks read objects by path; for a node
whose datasets live in S3 they read copies in ``<workspace>/cache/objects/``. The cache is
content-addressed like the stores: an entry is named by its physical hash and only ever
installed after its bytes hashed to that name, so an entry is never stale and never wrong.
New objects written by this node (ingest, transform, pulls) land in the cache first and are
uploaded from there, so the engines that wrote them never fetch them back.

It is bounded: after each addition the least recently used entries go while the total exceeds
``max_bytes``, except entries used within ``grace`` seconds (an engine may be reading them);
so the bound is soft by at most the working set of the last ``grace`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from pathlib import Path

from protocol.identity import Multihash
from storage.stores.base import Chunk, ObjectStore
from storage.stores.localfs import LocalFsObjectStore

DEFAULT_CACHE_BYTES = 10 << 30
DEFAULT_GRACE_SECONDS = 600.0


class ObjectCache:
    """Content-addressed local copies of objects, bounded by LRU eviction."""

    def __init__(
        self,
        root: Path,
        *,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        grace: float = DEFAULT_GRACE_SECONDS,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.grace = grace
        self.store = LocalFsObjectStore(root)
        self._fetching: dict[Multihash, asyncio.Future[Path]] = {}

    def __repr__(self) -> str:
        return f"ObjectCache({str(self.root)!r})"

    def path_of(self, hash: Multihash) -> Path:
        return self.store.path_of(hash)

    def writer(self, staging: Callable[[], Path] | None) -> LocalFsObjectStore:
        """The cache's objects, new ones written in ``staging()`` (the process's scratch folder,
        which the next process sweeps after a crash) before being renamed into place."""
        return self.store if staging is None else LocalFsObjectStore(self.root, staging)

    async def fetch(
        self, source: ObjectStore, hash: Multihash, staging: Callable[[], Path] | None = None
    ) -> Path:
        """The cached file of ``hash``, downloaded from ``source`` (hash-checked on the way in)
        if not cached yet; one download per object however many ask at once."""
        path = self.path_of(hash)
        if await asyncio.to_thread(_touch, path):
            return path
        pending = self._fetching.get(hash)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Path] = asyncio.get_running_loop().create_future()
        self._fetching[hash] = future
        try:
            await self.writer(staging).put_stream(source.iter_chunks(hash), expected=hash)
            await self.evict()
            future.set_result(path)
        except BaseException as err:
            future.set_exception(err)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._fetching[hash]
        return path

    async def add_file(
        self,
        path: Path,
        expected: Multihash | None,
        *,
        move: bool,
        staging: Callable[[], Path] | None = None,
    ) -> Path:
        """Put a local file into the cache (hash-checked); returns the entry."""
        hash = await self.writer(staging).put_file(path, expected, move=move)
        await asyncio.to_thread(_touch, self.path_of(hash))
        await self.evict()
        return self.path_of(hash)

    async def add_stream(
        self,
        chunks: AsyncIterable[Chunk],
        expected: Multihash | None,
        staging: Callable[[], Path] | None = None,
    ) -> Multihash:
        hash = await self.writer(staging).put_stream(chunks, expected)
        await self.evict()
        return hash

    async def evict(self) -> list[Path]:
        """Remove least recently used entries while the cache exceeds its bound."""
        return await asyncio.to_thread(_evict, self.root, self.max_bytes, time.time() - self.grace)


class CachedObjectStore(ObjectStore):
    """A remote object store (a bucket's ``data/`` or ``checkpoints/``) whose objects are read
    through, and written through, the workspace's ``ObjectCache``."""

    def __init__(
        self, remote: ObjectStore, cache: ObjectCache, staging: Callable[[], Path] | None = None
    ) -> None:
        self.remote = remote
        self.cache = cache
        self.staging = staging

    def __repr__(self) -> str:
        return repr(self.remote)

    def path_of(self, hash: Multihash) -> Path:
        return self.cache.path_of(hash)

    async def local_file(self, hash: Multihash) -> Path:
        return await self.cache.fetch(self.remote, hash, self.staging)

    async def contains(self, hash: Multihash) -> bool:
        return await self.remote.contains(hash)

    async def size(self, hash: Multihash) -> int:
        return await self.remote.size(hash)

    async def get_bytes(self, hash: Multihash) -> bytes:
        return await self.remote.get_bytes(hash)

    async def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[Chunk]:
        if await asyncio.to_thread(_touch, self.path_of(hash)):
            source: ObjectStore = self.cache.store
        else:
            source = self.remote
        async for chunk in source.iter_chunks(hash, chunk_size):
            yield chunk

    async def put_bytes(self, data: bytes, expected: Multihash | None = None) -> Multihash:
        return await self.remote.put_bytes(data, expected)

    async def put_many(self, items: Sequence[bytes]) -> list[Multihash]:
        return await self.remote.put_many(items)

    async def put_file(
        self, path: Path, expected: Multihash | None = None, *, move: bool = False
    ) -> Multihash:
        """Into the cache (hash-checked), then uploaded from there."""
        cached = await self.cache.add_file(Path(path), expected, move=move, staging=self.staging)
        hash = Multihash.from_multibase(cached.name)
        return await self.remote.put_file(cached, hash)

    async def put_stream(
        self, chunks: AsyncIterable[Chunk], expected: Multihash | None = None
    ) -> Multihash:
        hash = await self.cache.add_stream(chunks, expected, self.staging)
        return await self.remote.put_file(self.path_of(hash), hash)

    async def delete(self, hash: Multihash) -> None:
        await self.remote.delete(hash)

    def iter_hashes(self) -> AsyncIterator[Multihash]:
        return self.remote.iter_hashes()


def _touch(path: Path) -> bool:
    """Mark a cache entry used now; False if there is none."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def _evict(root: Path, max_bytes: int, used_before: float) -> list[Path]:
    entries = []
    total = 0
    try:
        with os.scandir(root) as found:
            for entry in found:
                if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                    continue
                stat = entry.stat(follow_symlinks=False)
                entries.append((stat.st_mtime, stat.st_size, Path(entry.path)))
                total += stat.st_size
    except FileNotFoundError:
        return []
    removed = []
    for used, size, path in sorted(entries):
        if total <= max_bytes or used >= used_before:
            break
        path.unlink(missing_ok=True)
        total -= size
        removed.append(path)
    return removed
