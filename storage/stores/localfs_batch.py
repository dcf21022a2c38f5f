"""A local folder's ``StagedObjects``: a pull's downloads written unsynced to the process's
staging folder, hash-checked as they arrive, and named together.

``commit`` makes the whole batch durable with one ``syncfs`` of the staging folder's file
system (an fsync per file where ``syncfs`` is missing), renames each file to its object name,
and fsyncs the objects' folder once: an object is never visible under its name before its bytes
are durable, and a thousand objects cost one device flush, not two thousand (the store's
``_name_staged``, which its ``put_many`` shares for large batches). Staged files live
in the process's own, ``flock``-held staging subfolder (``storage.scratch``): a process killed
before ``commit`` leaves them there, and the next process to open the workspace removes them
(never those of a process still running); the interrupted pull fetches them again.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from protocol.identity import Multicodec, Multihash
from storage.atomic import staging_path
from storage.direct_io import open_new
from storage.errors import HashMismatchError, disk_full
from storage.stores.base import Chunk, StagedObjects

_COPY_CHUNK = 8 << 20


@dataclass(frozen=True, slots=True)
class FolderAccess:
    """What a batch needs of its local object store."""

    root: Path
    stage_dir: Callable[[], Path]
    path_of: Callable[[Multihash], Path]
    name_staged: Callable[[dict[Path, Path]], bool]
    """Name staged files ``{target: staged path}`` durably, fsyncing each where ``syncfs`` is
    missing (``LocalFsObjectStore._name_staged``, which ``put_many`` shares)."""


class LocalFsStagedObjects(StagedObjects):
    def __init__(self, folder: FolderAccess) -> None:
        self._folder = folder
        self._staged: dict[Multihash, Path] = {}
        self._sizes: dict[Multihash, int] = {}
        self._bytes = 0
        self._naming = asyncio.Lock()

    async def put_stream(self, chunks: AsyncIterable[Chunk], expected: Multihash) -> Multihash:
        """One thread hop per chunk: a chunk is written once the next one arrived, the last one
        by the hop that also closes the file (the first one's opens it), so an object that
        arrives in one chunk, as most of a pull's do, costs one hop."""
        staged = staging_path(self._folder.stage_dir())
        digest = hashlib.sha3_256()
        size = 0
        f: BinaryIO | None = None
        held: Chunk | None = None
        kept = False
        try:
            try:
                async for chunk in chunks:
                    if held is not None:
                        f = await asyncio.to_thread(_write_part, f, staged, digest, held)
                    held = chunk
                    size += len(chunk)
                last, f = f, None  # the last hop closes it, whatever happens
                await asyncio.to_thread(_write_last, last, staged, digest, held or b"")
            finally:
                if f is not None:
                    await asyncio.shield(asyncio.to_thread(f.close))
            self._keep(expected, _multihash(digest), staged, size)
            kept = True
            return expected
        except OSError as err:
            if (full := disk_full(err, self._folder.root)) is not None:
                raise full from None
            raise
        finally:
            if not kept:
                await asyncio.shield(asyncio.to_thread(staged.unlink, missing_ok=True))

    async def put_file(self, path: Path, expected: Multihash) -> Multihash:
        staged = staging_path(self._folder.stage_dir())
        try:
            hash, size = await asyncio.to_thread(_copy_hashing, path, staged)
            self._keep(expected, hash, staged, size)
        except BaseException as err:
            await asyncio.shield(asyncio.to_thread(staged.unlink, missing_ok=True))
            if isinstance(err, OSError) and (full := disk_full(err, self._folder.root)):
                raise full from None
            raise
        return expected

    def _keep(self, expected: Multihash, actual: Multihash, staged: Path, size: int) -> None:
        if actual != expected:
            raise HashMismatchError(f"object for {self._folder.root}", expected, actual)
        if expected in self._staged:
            staged.unlink(missing_ok=True)  # the same object twice in one batch
            return
        self._staged[expected] = staged
        self._sizes[expected] = size
        self._bytes += size

    def readable_path(self, hash: Multihash) -> Path | None:
        return self._staged.get(hash)

    @property
    def staged_bytes(self) -> int:
        return self._bytes

    async def commit(self) -> None:
        async with self._naming:
            batch, self._staged, self._bytes = self._staged, {}, 0
            self._sizes = {}
            if batch:
                # Renames in a thread a cancellation cannot stop: let them end, so the caller
                # knows what is named.
                await asyncio.shield(asyncio.to_thread(self._name_all, batch))

    def _name_all(self, batch: dict[Multihash, Path]) -> None:
        self._folder.name_staged({self._folder.path_of(hash): path for hash, path in batch.items()})

    async def abort(self) -> None:
        batch, self._staged, self._bytes = self._staged, {}, 0
        self._sizes = {}
        if batch:
            await asyncio.shield(asyncio.to_thread(unlink_all, list(batch.values())))

    async def discard(self, hashes: Iterable[Multihash]) -> None:
        hashes = list(hashes)
        paths = [path for hash in hashes if (path := self._staged.pop(hash, None)) is not None]
        for hash in hashes:
            self._bytes -= self._sizes.pop(hash, 0)
        if paths:
            await asyncio.shield(asyncio.to_thread(unlink_all, paths))


def _open_new(path: Path) -> BinaryIO:
    """Written around the page cache where the file system allows it (``storage.direct_io``).
    Its folder is made only when missing (the first file of a pull): not a failing ``mkdir``
    and its exception per object."""
    try:
        return open_new(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open_new(path)


def _write_part(f: BinaryIO | None, path: Path, digest: Any, chunk: Chunk) -> BinaryIO:
    """Hash and write a chunk that is not the last, opening the staging file first if ``f`` is
    ``None``."""
    f = _open_new(path) if f is None else f
    try:
        hash_and_write(digest, f, chunk)
    except BaseException:
        f.close()
        raise
    return f


def _write_last(f: BinaryIO | None, path: Path, digest: Any, chunk: Chunk) -> None:
    """Hash and write the last chunk and close the file (opened first if ``f`` is ``None``)."""
    with _open_new(path) if f is None else f as out:
        hash_and_write(digest, out, chunk)


def _multihash(digest: Any) -> Multihash:
    return Multihash(code=Multicodec.SHA3_256, digest=digest.digest())


def _copy_hashing(source: Path, staged: Path) -> tuple[Multihash, int]:
    """One read: the bytes are hashed as they are written, so what is kept is what was checked
    even if the source changes meanwhile."""
    digest = hashlib.sha3_256()
    size = 0
    with open(source, "rb", buffering=0) as src, _open_new(staged) as dst:
        while chunk := src.read(_COPY_CHUNK):
            digest.update(chunk)
            write_all(dst, chunk)
            size += len(chunk)
    return _multihash(digest), size


def unlink_all(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def write_all(f: BinaryIO, chunk: Chunk) -> None:
    """Unbuffered: each chunk reaches the file at once, not Python's buffer, so what a killed
    pull had received is on disk in its staging folder (and a stall shows as a file that
    stopped growing)."""
    view = memoryview(chunk)
    while view:
        view = view[f.write(view) or 0 :]


def hash_and_write(digest: Any, f: BinaryIO, chunk: Chunk) -> None:
    """Hashing a received chunk in the same worker thread as its write keeps the event loop free
    (hashlib lets go of the GIL, so downloads go on while chunks are hashed)."""
    digest.update(chunk)
    write_all(f, chunk)
