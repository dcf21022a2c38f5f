"""Abstract interfaces of the content-addressed object store, the reference store and the named
file store. Local FS implementations live in ``localfs``; HTTP and IPFS ones implement the same
methods so a ``Dataset`` works over any of them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import TypeAlias

from protocol.identity import Multihash

Chunk: TypeAlias = bytes | memoryview
"""A piece of a streamed object: bytes, or a view of a client's buffer handed on uncopied (the
S3 store's ranged reads). Every reader of chunks takes both: hashlib, file and socket writes,
``len``, ``b"".join``, obstore's uploads."""


class ObjectStore(ABC):
    """Immutable objects named by the SHA3-256 multihash of their bytes.

    Every ``put_*`` hashes what it stores and raises ``HashMismatchError`` when ``expected`` is
    given and differs, so an object can never be visible under a wrong name. Reads return raw
    bytes; whoever needs to trust them re-hashes (the chain does for blocks).
    """

    @abstractmethod
    async def contains(self, hash: Multihash) -> bool: ...

    async def missing(self, hashes: Sequence[Multihash]) -> list[Multihash]:
        """Those of ``hashes`` not stored, in order (a pull asks this of thousands of blocks at
        once; a backend may answer in one go)."""
        return [hash for hash in hashes if not await self.contains(hash)]

    @abstractmethod
    async def size(self, hash: Multihash) -> int:
        """Size in bytes; ``ObjectNotFoundError`` if absent."""

    @abstractmethod
    async def get_bytes(self, hash: Multihash) -> bytes:
        """Whole object; ``ObjectNotFoundError`` if absent. Meant for small objects (blocks)."""

    @abstractmethod
    def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[Chunk]:
        """Stream a (possibly large) object; ``ObjectNotFoundError`` if absent."""

    @abstractmethod
    async def put_bytes(self, data: bytes, expected: Multihash | None = None) -> Multihash: ...

    async def put_many(self, items: Sequence[bytes]) -> list[Multihash]:
        """Store several small objects; backends may batch their durability work."""
        return [await self.put_bytes(item) for item in items]

    async def put_many_read_back(
        self, items: Sequence[bytes]
    ) -> tuple[list[Multihash], set[Multihash]]:
        """``put_many``, and those objects whose stored files were read back after the batch and
        found to hash to their names (a pull's commit need not re-read them); none by default."""
        return await self.put_many(items), set()

    @abstractmethod
    async def put_file(
        self, path: Path, expected: Multihash | None = None, *, move: bool = False
    ) -> Multihash:
        """Store a local file's content; with ``move`` the file is moved, not copied."""

    @abstractmethod
    async def put_stream(
        self, chunks: AsyncIterable[Chunk], expected: Multihash | None = None
    ) -> Multihash: ...

    @abstractmethod
    async def delete(self, hash: Multihash) -> None:
        """Remove an object; absent objects are ignored."""

    @abstractmethod
    def iter_hashes(self) -> AsyncIterator[Multihash]:
        """Every stored object's hash, in no particular order."""

    def staged(self) -> StagedObjects:
        """A batch of objects written now and named together later (a pull's downloads). Stores
        with no cheaper way name each object as it is written (``NamedAtOnce``)."""
        return NamedAtOnce(self)


class StagedObjects(ABC):
    """Objects written and hash-checked one by one, then named together by ``commit``.

    A pull writes what it downloads here, checks it, and names it all just before its head
    moves: a local folder makes the whole batch durable with one ``syncfs`` instead of an fsync
    per object (an object still gets its name only once its bytes are durable). Until ``commit``
    an object may be readable only at ``readable_path``; ``abort`` drops what is not named yet.
    """

    @abstractmethod
    async def put_stream(self, chunks: AsyncIterable[Chunk], expected: Multihash) -> Multihash:
        """Write an object; ``HashMismatchError`` (and nothing kept) if it is not ``expected``."""

    @abstractmethod
    async def put_file(self, path: Path, expected: Multihash) -> Multihash:
        """Write a copy of a local file's content, checked as ``put_stream`` checks."""

    @abstractmethod
    def readable_path(self, hash: Multihash) -> Path | None:
        """Where a written, not yet named object can be read; ``None`` if it is not one."""

    @property
    @abstractmethod
    def staged_bytes(self) -> int:
        """Bytes written and not yet named."""

    @abstractmethod
    async def commit(self) -> None:
        """Make every object written so far durable, then give each its name."""

    @abstractmethod
    async def abort(self) -> None:
        """Remove every object written and not yet named."""

    @abstractmethod
    async def discard(self, hashes: Iterable[Multihash]) -> None:
        """Remove these objects, written and not wanted after all (a source sent them before
        any block named them, and none did)."""


class NamedAtOnce(StagedObjects):
    """The default batch: each object is stored (durable and named) as it is written, so
    ``commit`` and ``abort`` have nothing to do (the caller deletes what it no longer wants)."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    async def put_stream(self, chunks: AsyncIterable[Chunk], expected: Multihash) -> Multihash:
        return await self._store.put_stream(chunks, expected)

    async def put_file(self, path: Path, expected: Multihash) -> Multihash:
        return await self._store.put_file(path, expected)

    def readable_path(self, hash: Multihash) -> Path | None:
        return None

    @property
    def staged_bytes(self) -> int:
        return 0

    async def commit(self) -> None:
        return None

    async def abort(self) -> None:
        return None

    async def discard(self, hashes: Iterable[Multihash]) -> None:
        for hash in hashes:
            await self._store.delete(hash)


class RefStore(ABC):
    """Named pointers to blocks (``head``) moved only by compare-and-swap."""

    @abstractmethod
    async def get(self, name: str) -> Multihash | None:
        """The ref's value, or ``None`` if it is not set."""

    @abstractmethod
    async def set(self, name: str, new: Multihash, *, expected: Multihash | None) -> None:
        """Point ``name`` at ``new`` if it currently equals ``expected`` (``None``: unset);
        otherwise raise ``RefCasError`` and change nothing."""

    @abstractmethod
    async def delete(self, name: str, *, expected: Multihash | None) -> None:
        """Remove ``name`` if it currently equals ``expected``, else ``RefCasError``."""

    @abstractmethod
    async def names(self) -> list[str]: ...

    async def get_signature(self, name: str) -> bytes | None:
        """The raw signed-ref document served beside ref ``name`` (``refs/<name>.sig``), or
        ``None``; untrusted bytes, parsed and verified by ``protocol.transfer.signed_head``.
        Stores that cannot hold one have none."""
        return None

    async def set_signature(self, name: str, data: bytes) -> None:
        """Store the signed-ref document beside ref ``name`` (writable stores only)."""
        raise NotImplementedError(f"{type(self).__name__} cannot store signatures")


class NamedStore(ABC):
    """Small mutable files by name (a dataset's ``info/``)."""

    @abstractmethod
    async def get(self, name: str) -> bytes | None: ...

    @abstractmethod
    async def set(self, name: str, data: bytes) -> None: ...

    @abstractmethod
    async def delete(self, name: str) -> None: ...
