"""Local file system implementations of the stores, in the reference's on-disk format.

Small objects (blocks, refs, info files) are *read* inline on the event loop: they are a few
hundred bytes from the page cache and a thread hop would cost more than the read (validation reads
hundreds of thousands of blocks). Everything that may wait on the device runs in worker threads:
writes (each one fsyncs the file and its folder), large reads, folder listings, deletions.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import functools
import hashlib
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from protocol.errors import ParseError
from protocol.identity import Multicodec, Multihash
from storage.atomic import (
    fsync_dir,
    fsync_file,
    move_file_atomic,
    staging_path,
    sync_file_system,
    write_file_atomic,
    write_staged,
)
from storage.errors import (
    HashMismatchError,
    ObjectNotFoundError,
    RefCasError,
    StorageError,
    disk_full,
)
from storage.layout import object_name
from storage.stores.base import Chunk, NamedStore, ObjectStore, RefStore, StagedObjects
from storage.stores.batch_run import remove_staged, run_batch_child
from storage.stores.localfs_batch import (
    FolderAccess,
    LocalFsStagedObjects,
    hash_and_write,
    unlink_all,
    write_all,
)
from storage.stores.ref_file import read_ref_file

INLINE_IO_LIMIT = 256 * 1024
_PUT_THREADS = 4
_PARALLEL_PUT_MIN = 16
_SYNCFS_BATCH_MIN = 256
"""From this many objects, one ``syncfs`` costs less than an fsync per file."""
_INLINE_STATS = 64
"""``missing`` looks fewer objects up inline (a thread hand-off costs more than the stats)."""
_FILE_CHUNK = 1 << 20
_COPY_CHUNK = 8 << 20


def hash_file(path: Path) -> tuple[Multihash, int]:
    """SHA3-256 multihash and size of a file (blocking: call from a thread)."""
    digest = hashlib.sha3_256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_FILE_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return Multihash(code=Multicodec.SHA3_256, digest=digest.digest()), size


def _listed_files(folder: Path, limit: int) -> set[str] | None:
    """The names of the files in ``folder`` (none if it does not exist), or ``None`` if it has
    more than ``limit`` entries (blocking: call from a thread)."""
    names: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= limit:
                    return None
                if entry.is_file():
                    names.add(entry.name)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return names


SIGNATURE_SUFFIX = ".sig"
"""``refs/head.sig`` holds the signed statement of ``refs/head`` (``docs/signed-heads.md``)."""
MAX_SIGNATURE_BYTES = 4096


def _check_simple_name(name: str, what: str) -> None:
    if not name or "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        raise StorageError(f"invalid {what} name {name!r}")


class LocalFsObjectStore(ObjectStore):
    """Objects as files named ``f1620<hex digest>`` in one folder.

    New objects are written under a temporary name in ``staging()`` (the workspace's staging
    folder, see ``storage.scratch``; default: the objects' own folder), fsynced, then renamed
    into place.
    """

    def __init__(self, root: Path, staging: Callable[[], Path] | None = None) -> None:
        self.root = root
        self._prefix = os.path.join(root, "")
        self._staging = staging

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    def path_of(self, hash: Multihash) -> Path:
        return self.root / object_name(hash)

    async def local_file(self, hash: Multihash) -> Path:
        """The object's file (whether it exists is the reader's to find out)."""
        return self.path_of(hash)

    async def contains(self, hash: Multihash) -> bool:
        # A small read like get_bytes' (module docstring): pulls ask this for every block.
        return os.path.isfile(self._prefix + object_name(hash))  # noqa: ASYNC240 (a stat, inline by design)

    async def missing(self, hashes: Sequence[Multihash]) -> list[Multihash]:
        # Thousands of lookups at once run in a thread, beside the loop's work: 10,000 stats
        # cost a pull's event loop ~0.05-0.1 s inline.
        if len(hashes) < _INLINE_STATS:
            return await super().missing(hashes)
        return await asyncio.to_thread(self._missing_blocking, hashes)

    def _missing_blocking(self, hashes: Sequence[Multihash]) -> list[Multihash]:
        """The folder is listed first, up to twice as many entries as ``hashes``: a first pull's
        10,000 blocks then cost one empty listing instead of 10,000 failing stats (and their
        names), and a folder of about their size one listing; a larger folder is asked by stat,
        one per hash, as a listing of it would cost more."""
        held = _listed_files(self.root, 2 * len(hashes))
        if held is not None:
            return [h for h in hashes if object_name(h) not in held] if held else list(hashes)
        prefix = self._prefix
        return [h for h in hashes if not os.path.isfile(prefix + object_name(h))]

    async def size(self, hash: Multihash) -> int:
        try:
            return os.stat(self._prefix + object_name(hash)).st_size
        except FileNotFoundError:
            raise ObjectNotFoundError(str(self.root), hash) from None

    async def get_bytes(self, hash: Multihash) -> bytes:
        fd = self._open(hash)
        try:
            size = os.fstat(fd).st_size
            if size > INLINE_IO_LIMIT:
                return await asyncio.to_thread(_read_all, fd, size)
            return _read_all(fd, size)
        finally:
            os.close(fd)

    def read_blocking(self, hash: Multihash) -> bytes:
        """The object's bytes, read in the calling thread (a worker thread walking blocks)."""
        fd = self._open(hash)
        try:
            return _read_all(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def _open(self, hash: Multihash) -> int:
        # Blocks are read hundreds of thousands of times during validation: plain os calls
        # (half the CPU of ``open().read()`` over small files).
        try:
            return os.open(self._prefix + object_name(hash), os.O_RDONLY)
        except FileNotFoundError:
            raise ObjectNotFoundError(str(self.root), hash) from None

    async def iter_chunks(
        self, hash: Multihash, chunk_size: int = _FILE_CHUNK
    ) -> AsyncIterator[bytes]:
        try:
            f = await asyncio.to_thread(open, self.path_of(hash), "rb")
        except FileNotFoundError:
            raise ObjectNotFoundError(str(self.root), hash) from None
        with f:
            while chunk := await asyncio.to_thread(f.read, chunk_size):
                yield chunk

    def _ensure_root(self) -> None:
        if not self.root.is_dir():
            self.root.mkdir(parents=True, exist_ok=True)

    def _stage_dir(self) -> Path:
        return self._staging() if self._staging is not None else self.root

    def _install(self, staged: Path, target: Path) -> None:
        """Rename a staged file into place (copying if staging is on another file system)."""
        try:
            os.replace(staged, target)
        except OSError as err:
            if err.errno != errno.EXDEV:
                raise
            move_file_atomic(staged, target)

    def _check(self, expected: Multihash | None, actual: Multihash) -> None:
        if expected is not None and expected != actual:
            raise HashMismatchError(f"object for {self.root}", expected, actual)

    async def put_bytes(self, data: bytes, expected: Multihash | None = None) -> Multihash:
        return await asyncio.to_thread(self._put_bytes_blocking, data, expected, True)

    def _put_bytes_blocking(
        self, data: bytes, expected: Multihash | None, sync_dir: bool
    ) -> Multihash:
        hash = Multihash.from_digest_sha3_256(data)
        self._check(expected, hash)
        target = self.path_of(hash)
        if target.exists():
            return hash
        self._ensure_root()
        staged = write_staged(self._stage_dir(), data)
        try:
            self._install(staged, target)
        finally:
            staged.unlink(missing_ok=True)
        if sync_dir:
            fsync_dir(self.root)
        return hash

    async def put_many(self, items: Sequence[bytes]) -> list[Multihash]:
        """Write every object durably, then fsync the folder once for the whole batch.

        Small batches fsync each file. A large batch (a pull's thousands of blocks) is staged
        unsynced, made durable by one ``syncfs`` of the file system, and only then renamed into
        place: each object still has its name only once its bytes are durable, without a
        journal commit per file (where ``syncfs`` is missing, a few threads fsync the files).
        """
        return (await self.put_many_read_back(items))[0]

    async def put_many_read_back(
        self, items: Sequence[bytes]
    ) -> tuple[list[Multihash], set[Multihash]]:
        """Read back by the batch child (none when the batch is written another way)."""
        if len(items) >= _SYNCFS_BATCH_MIN:
            done = await asyncio.to_thread(self._put_batch_synced_once, items)
            if done is not None:
                return done
        if len(items) < _PARALLEL_PUT_MIN:
            hashes = await asyncio.to_thread(self._put_group, items)
        else:
            step = -(-len(items) // _PUT_THREADS)
            groups = [items[i : i + step] for i in range(0, len(items), step)]
            results = await asyncio.gather(
                *(asyncio.to_thread(self._put_group, group) for group in groups)
            )
            hashes = [h for group in results for h in group]
        if hashes:
            await asyncio.to_thread(fsync_dir, self.root)
        return hashes, set()

    def _put_batch_synced_once(
        self, items: Sequence[bytes]
    ) -> tuple[list[Multihash], set[Multihash]] | None:
        """``put_many``'s large batches; ``None`` (nothing written) without ``syncfs``. Written
        by a process of its own where staging and objects share a file system (``batch_child``:
        the files' system calls then do not wait for this process's GIL)."""
        self._ensure_root()
        stage = self._stage_dir()
        if os.stat(stage).st_dev == os.stat(self.root).st_dev:
            return self._put_batch_in_child(items, stage)
        return self._put_batch_in_process(items, stage)

    def _put_batch_in_process(
        self, items: Sequence[bytes], stage: Path
    ) -> tuple[list[Multihash], set[Multihash]] | None:
        hashes = [Multihash.from_digest_sha3_256(item) for item in items]
        staged: dict[Path, Path] = {}
        try:
            for hash, item in zip(hashes, items, strict=True):
                target = self.path_of(hash)
                if target not in staged and not target.exists():
                    staged[target] = write_staged(stage, item, sync=False)
        except BaseException as err:
            unlink_all(staged.values())
            if isinstance(err, OSError) and (full := disk_full(err, self.root)):
                raise full from None
            raise
        if staged and not self._name_staged(staged, fsync_each=False):
            return None
        return hashes, set()

    def _put_batch_in_child(
        self, items: Sequence[bytes], stage: Path
    ) -> tuple[list[Multihash], set[Multihash]] | None:
        stem = staging_path(stage).name
        try:
            answer = run_batch_child(self.root, stage, stem, items)
        except BaseException:
            remove_staged(stage, stem)  # the child failed or was killed half-way
            raise
        if answer is None:  # no interpreter to start (an embedded Python)
            return self._put_batch_in_process(items, stage)
        kind = answer[:1]
        if kind == b"N":
            return None
        if kind == b"E":
            error = json.loads(answer[1:])
            err = OSError(error["errno"], error["strerror"], error["filename"])
            if (full := disk_full(err, self.root)) is not None:
                raise full from None
            raise err
        if len(answer) != 1 + 33 * len(items):
            raise StorageError(f"writing {len(items)} objects to {self.root}: a short answer")
        digests, flags = answer[1 : 1 + 32 * len(items)], answer[1 + 32 * len(items) :]
        hashes = [
            Multihash(code=Multicodec.SHA3_256, digest=digests[i : i + 32])
            for i in range(0, len(digests), 32)
        ]
        return hashes, {hash for hash, flag in zip(hashes, flags, strict=True) if flag == 1}

    def _name_staged(self, staged: dict[Path, Path], *, fsync_each: bool) -> bool:
        """Names unsynced staged files (``{target: staged path}``) for a batch's price: one
        ``syncfs`` of the staging folder's file system, each file renamed to its target (unless
        it is there already), one fsync of the folder, so no object has its name before its
        bytes are durable. Without ``syncfs``: an fsync per file first if ``fsync_each``, else
        nothing is named and the answer is ``False`` (the caller then writes one by one). The
        staged files are gone afterwards either way (a renamed one is not unlinked again: for a
        pull's 10,000 blocks, that was 10,000 failing syscalls)."""
        left = dict(staged)
        try:
            if not sync_file_system(self._stage_dir()):
                if not fsync_each:
                    return False
                for path in staged.values():
                    fsync_file(path)
            self._ensure_root()
            for target, path in staged.items():
                if not target.exists():
                    self._install(path, target)
                    del left[target]
            fsync_dir(self.root)
            return True
        except OSError as err:
            if (full := disk_full(err, self.root)) is not None:
                raise full from None
            raise
        finally:
            unlink_all(left.values())  # stored already, not reached, or not named at all

    def _put_group(self, items: Sequence[bytes]) -> list[Multihash]:
        """Writes each object fsynced, leaving the folder's fsync to the caller."""
        return [self._put_bytes_blocking(item, None, False) for item in items]

    async def put_file(
        self, path: Path, expected: Multihash | None = None, *, move: bool = False
    ) -> Multihash:
        return await asyncio.to_thread(self._put_file_blocking, Path(path), expected, move)

    def _put_file_blocking(self, path: Path, expected: Multihash | None, move: bool) -> Multihash:
        if move:
            return self._move_file(path, expected)
        if expected is not None and self.path_of(expected).exists():
            return expected
        self._ensure_root()
        staged = staging_path(self._stage_dir())
        try:
            # One read: the bytes are hashed as they are written, so what is stored is what was
            # checked even if the source changes meanwhile.
            digest = hashlib.sha3_256()
            with open(path, "rb", buffering=0) as src, open(staged, "xb", buffering=0) as dst:
                while chunk := src.read(_COPY_CHUNK):
                    digest.update(chunk)
                    write_all(dst, chunk)
                os.fsync(dst.fileno())
        except OSError as err:
            staged.unlink(missing_ok=True)
            if (full := disk_full(err, self.root)) is not None:
                raise full from None
            raise
        try:
            hash = Multihash(code=Multicodec.SHA3_256, digest=digest.digest())
            self._check(expected, hash)
            self._publish(staged, self.path_of(hash))
        finally:
            staged.unlink(missing_ok=True)
        return hash

    def _move_file(self, path: Path, expected: Multihash | None) -> Multihash:
        hash, _ = hash_file(path)
        self._check(expected, hash)
        target = self.path_of(hash)
        if target.exists():
            path.unlink()
            return hash
        self._ensure_root()
        move_file_atomic(path, target)
        return hash

    async def put_stream(
        self, chunks: AsyncIterable[Chunk], expected: Multihash | None = None
    ) -> Multihash:
        """Three kinds of thread hop per object, no more (a pull stores thousands): open the
        staging file; hash and write each chunk; fsync, name it and fsync the folder."""
        staged = staging_path(self._stage_dir())
        digest = hashlib.sha3_256()
        stored = False
        try:
            try:
                f = await asyncio.to_thread(self._open_staged, staged)
                with f:
                    async for chunk in chunks:
                        await asyncio.to_thread(hash_and_write, digest, f, chunk)
                    hash = Multihash(code=Multicodec.SHA3_256, digest=digest.digest())
                    self._check(expected, hash)
                    finish = asyncio.ensure_future(
                        asyncio.to_thread(self._sync_and_publish, f, staged, self.path_of(hash))
                    )
                    try:
                        await asyncio.shield(finish)
                    except asyncio.CancelledError:
                        # An fsync and a rename: let them end, so a cancelled caller knows what
                        # is stored.
                        await finish
                        raise
                    stored = True
            except OSError as err:
                if (full := disk_full(err, self.root)) is not None:
                    raise full from None
                raise
            return hash
        finally:
            if not stored:
                await asyncio.shield(asyncio.to_thread(staged.unlink, missing_ok=True))

    def _open_staged(self, staged: Path) -> BinaryIO:
        self._ensure_root()
        return open(staged, "xb", buffering=0)

    def _sync_and_publish(self, f: BinaryIO, staged: Path, target: Path) -> None:
        os.fsync(f.fileno())
        self._publish(staged, target)
        staged.unlink(missing_ok=True)  # still there if the object was stored already

    def _publish(self, staged: Path, target: Path) -> None:
        """Moves a staged object to its name (unless it is there already), durably."""
        if not target.exists():
            self._install(staged, target)
            fsync_dir(self.root)

    def staged(self) -> StagedObjects:
        """Written unsynced to the staging folder, named with one ``syncfs`` (``localfs_batch``)."""
        return LocalFsStagedObjects(
            FolderAccess(
                self.root,
                self._stage_dir,
                self.path_of,
                functools.partial(self._name_staged, fsync_each=True),
            )
        )

    async def delete(self, hash: Multihash) -> None:
        await asyncio.to_thread(self.path_of(hash).unlink, missing_ok=True)

    async def iter_hashes(self) -> AsyncIterator[Multihash]:
        for name in await asyncio.to_thread(_visible_names, self.root):
            try:
                yield Multihash.from_multibase(name)
            except ParseError:
                continue


def local_path(store: ObjectStore, hash: Multihash) -> Path:
    """The file of an object of a local dataset (Spark and imports read objects by path)."""
    if not isinstance(store, LocalFsObjectStore):
        raise StorageError(f"{store!r} does not keep its objects on the local file system")
    return store.path_of(hash)


def _visible_names(folder: Path) -> list[str]:
    """Names in ``folder`` but dot-files (staged writes); none if it does not exist."""
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def _read_all(fd: int, size: int) -> bytes:
    parts = []
    while chunk := os.read(fd, max(size, 1 << 16)):
        parts.append(chunk)
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


class LocalFsRefStore(RefStore):
    """Refs as files holding the multibase hash (no newline), as the reference writes them.

    Compare-and-swap holds an exclusive ``flock`` on the refs folder while it reads, compares and
    atomically replaces the file, which serializes writers in other threads and processes.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    async def get(self, name: str) -> Multihash | None:
        _check_simple_name(name, "ref")
        return self._read(name)

    def _read(self, name: str) -> Multihash | None:
        return read_ref_file(self.root / name)

    async def set(self, name: str, new: Multihash, *, expected: Multihash | None) -> None:
        _check_simple_name(name, "ref")
        await asyncio.to_thread(self._swap, name, expected, new)

    async def delete(self, name: str, *, expected: Multihash | None) -> None:
        _check_simple_name(name, "ref")
        await asyncio.to_thread(self._swap, name, expected, None)

    def _swap(self, name: str, expected: Multihash | None, new: Multihash | None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            actual = self._read(name)
            if actual != expected:
                raise RefCasError(f"ref {self.root / name}", expected, actual)
            path = self.root / name
            if new is None:
                path.unlink(missing_ok=True)
                fsync_dir(self.root)
            else:
                write_file_atomic(path, object_name(new).encode("ascii"))
        finally:
            os.close(lock_fd)

    async def names(self) -> list[str]:
        names = await asyncio.to_thread(_visible_names, self.root)
        return sorted(name for name in names if not name.endswith(SIGNATURE_SUFFIX))

    async def get_signature(self, name: str) -> bytes | None:
        _check_simple_name(name, "ref")
        return await asyncio.to_thread(_read_small, self.root / f"{name}{SIGNATURE_SUFFIX}")

    async def set_signature(self, name: str, data: bytes) -> None:
        """Atomic replace (temp name, fsync, rename), so readers see the old or the new one."""
        _check_simple_name(name, "ref")
        path = self.root / f"{name}{SIGNATURE_SUFFIX}"
        await asyncio.to_thread(_write_beside, path, data)


class LocalFsNamedStore(NamedStore):
    """Small files by name in one folder (``info/``), replaced atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def get(self, name: str) -> bytes | None:
        _check_simple_name(name, "info file")
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    async def set(self, name: str, data: bytes) -> None:
        _check_simple_name(name, "info file")
        await asyncio.to_thread(self._write, name, data)

    def _write(self, name: str, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_file_atomic(self.root / name, data)

    async def delete(self, name: str) -> None:
        _check_simple_name(name, "info file")
        await asyncio.to_thread((self.root / name).unlink, missing_ok=True)


def _read_small(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read(MAX_SIGNATURE_BYTES + 1)
    except FileNotFoundError:
        return None


def _write_beside(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(path, data)
