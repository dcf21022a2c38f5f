"""A dataset in an S3 bucket, in the spec's layout under a key prefix: ``blocks/<multibase>``,
``data/…``, ``checkpoints/…``, ``refs/head``, ``info/…`` (the keys kamu-cli writes).

Objects stay content-addressed: every upload is hashed on its way out and a body that does not
hash to its name makes the upload fail before it completes (S3 shows a multipart upload only once
completed, a single PUT only once whole), so no object is ever visible under a wrong name. Large
objects go up as multipart uploads and come down as parallel ranged reads. ``refs/head`` moves by
compare-and-swap with conditional writes (``If-None-Match: *`` to create, ``If-Match: <etag>`` to
replace): of two racing writers exactly one wins, the other gets ``RefCasError``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from pathlib import Path
from typing import BinaryIO

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multicodec, Multihash
from storage.dataset import Dataset
from storage.errors import (
    CorruptRefError,
    HashMismatchError,
    ObjectNotFoundError,
    RefCasError,
    StorageError,
)
from storage.layout import object_name
from storage.s3_client import PART_SIZE, S3Bucket, S3ConflictError
from storage.s3_settings import S3Location
from storage.stores.base import Chunk, NamedStore, ObjectStore, RefStore
from storage.stores.localfs import hash_file

SINGLE_PUT_LIMIT = 8 << 20
"""Objects up to this size go up in one PUT; larger ones in multipart uploads."""
RANGE_SIZE = 8 << 20
"""Objects larger than this come down as ranged reads of this size, ``RANGE_WINDOW`` at once."""
RANGE_WINDOW = 4
_PUT_MANY_PARALLEL = 16
_FILE_CHUNK = 1 << 20
_THREAD_HASH_MIN = 256 << 10
MAX_SIGNATURE_BYTES = 4096
SIGNATURE_SUFFIX = ".sig"


def s3_dataset(
    bucket: S3Bucket, location: S3Location, dataset_id: DatasetId | None = None
) -> Dataset:
    """The dataset under ``location`` (a key prefix of ``bucket``), in the spec's layout."""
    return Dataset(
        blocks=S3ObjectStore(bucket, location, "blocks"),
        data=S3ObjectStore(bucket, location, "data"),
        checkpoints=S3ObjectStore(bucket, location, "checkpoints"),
        refs=S3RefStore(bucket, location),
        info=S3NamedStore(bucket, location),
        dataset_id=dataset_id,
    )


class S3ObjectStore(ObjectStore):
    """Objects named ``<prefix><folder>/f1620<hex digest>``."""

    def __init__(self, bucket: S3Bucket, location: S3Location, folder: str) -> None:
        self.bucket = bucket
        self.location = location
        self.folder = location.key(f"{folder}/")

    def __repr__(self) -> str:
        return f"S3ObjectStore({self.location.url}{self.folder[len(self.location.prefix) :]})"

    def key_of(self, hash: Multihash) -> str:
        return f"{self.folder}{object_name(hash)}"

    async def contains(self, hash: Multihash) -> bool:
        return await self.bucket.head(self.key_of(hash)) is not None

    async def size(self, hash: Multihash) -> int:
        found = await self.bucket.head(self.key_of(hash))
        if found is None:
            raise ObjectNotFoundError(repr(self), hash)
        return found[0]

    async def get_bytes(self, hash: Multihash) -> bytes:
        found = await self.bucket.get(self.key_of(hash))
        if found is None:
            raise ObjectNotFoundError(repr(self), hash)
        return found[0]

    async def iter_chunks(
        self, hash: Multihash, chunk_size: int = _FILE_CHUNK
    ) -> AsyncIterator[Chunk]:
        """The first range's answer gives the object's size (no HEAD first); the rest come as
        parallel ranged reads, yielded in order, at most ``RANGE_WINDOW`` held at once. Chunks
        are views of obstore's buffers, hashed and written by the caller without a copy (copying
        each 8 MB range cost a pull about an eighth of its copy CPU)."""
        key = self.key_of(hash)
        found = await self.bucket.get_start(key, RANGE_SIZE)
        if found is None:
            raise ObjectNotFoundError(repr(self), hash)
        first, size = found
        starts = iter(range(len(first), size, RANGE_SIZE))
        pending = [
            asyncio.ensure_future(self._range(key, start, size))
            for start in itertools.islice(starts, RANGE_WINDOW)
        ]
        try:
            for offset in range(0, len(first), chunk_size):
                yield first[offset : offset + chunk_size]
            while pending:
                data = await pending.pop(0)
                if (start := next(starts, None)) is not None:
                    pending.append(asyncio.ensure_future(self._range(key, start, size)))
                for offset in range(0, len(data), chunk_size):
                    yield data[offset : offset + chunk_size]
        finally:
            for task in pending:
                task.cancel()

    async def _range(self, key: str, start: int, size: int) -> memoryview:
        return await self.bucket.get_range(key, start, min(RANGE_SIZE, size - start))

    def _check(self, expected: Multihash | None, actual: Multihash) -> None:
        if expected is not None and expected != actual:
            raise HashMismatchError(f"object for {self!r}", expected, actual)

    async def put_bytes(self, data: bytes, expected: Multihash | None = None) -> Multihash:
        hash = Multihash.from_digest_sha3_256(data)
        self._check(expected, hash)
        key = self.key_of(hash)
        if await self.bucket.head(key) is None:
            await self.bucket.put(key, data)
        return hash

    async def put_many(self, items: Sequence[bytes]) -> list[Multihash]:
        limit = asyncio.Semaphore(_PUT_MANY_PARALLEL)

        async def one(data: bytes) -> Multihash:
            async with limit:
                return await self.put_bytes(data)

        return list(await asyncio.gather(*(one(item) for item in items)))

    async def put_file(
        self, path: Path, expected: Multihash | None = None, *, move: bool = False
    ) -> Multihash:
        """Read in part-sized pieces straight from the file (one thread hop per part), each piece
        hashed in another thread while obstore uploads the ones before it."""
        path = Path(path)
        if expected is None:
            expected = (await asyncio.to_thread(hash_file, path))[0]
        key = self.key_of(expected)
        if await self.bucket.head(key) is None:
            file = await asyncio.to_thread(open, path, "rb", buffering=0)
            with file:
                await self._upload(key, _read_file(file), expected)
        if move:
            await asyncio.to_thread(path.unlink, missing_ok=True)
        return expected

    async def put_stream(
        self, chunks: AsyncIterable[Chunk], expected: Multihash | None = None
    ) -> Multihash:
        if expected is not None:
            await self._upload(self.key_of(expected), chunks, expected)
            return expected
        # The name is known only once every byte is hashed: spool to a local file first.
        spool = await asyncio.to_thread(tempfile.TemporaryFile)
        with spool:
            hashing = _Hashing()
            async for chunk in chunks:
                await hashing.add(chunk)
                await asyncio.to_thread(spool.write, chunk)
            hash = await hashing.result()
            await asyncio.to_thread(spool.seek, 0)
            key = self.key_of(hash)
            if await self.bucket.head(key) is None:
                await self._upload(key, _read_file(spool), hash)
        return hash

    async def _upload(self, key: str, chunks: AsyncIterable[Chunk], expected: Multihash) -> None:
        """Upload ``chunks`` to ``key``, failing before the upload completes if they do not hash
        to ``expected``. Small bodies go in one PUT once hashed; larger ones in a multipart upload
        whose parts are hashed while they go up (the check runs before it completes)."""
        hashing = _Hashing()
        try:
            await self._upload_hashed(key, aiter(chunks), expected, hashing)
        finally:
            await hashing.settle()

    async def _upload_hashed(
        self, key: str, source: AsyncIterator[Chunk], expected: Multihash, hashing: _Hashing
    ) -> None:
        head: list[Chunk] = []
        held = 0
        async for chunk in source:
            await hashing.add(chunk)
            head.append(chunk)
            held += len(chunk)
            if held > SINGLE_PUT_LIMIT:
                break
        else:
            self._check(expected, await hashing.result())
            await self.bucket.put(key, head[0] if len(head) == 1 else b"".join(head))
            return

        async def parts() -> AsyncIterator[Chunk]:
            for chunk in head:
                yield chunk
            head.clear()
            async for chunk in source:
                await hashing.add(chunk)
                yield chunk
            # Raised inside the upload's body: the multipart upload is aborted, never completed.
            self._check(expected, await hashing.result())

        await self.bucket.put(key, parts())

    async def delete(self, hash: Multihash) -> None:
        await self.bucket.delete(self.key_of(hash))

    async def iter_hashes(self) -> AsyncIterator[Multihash]:
        async for key in self.bucket.list_keys(self.folder):
            name = key[len(self.folder) :]
            if "/" in name:
                continue
            try:
                yield Multihash.from_multibase(name)
            except ParseError:
                continue


class S3RefStore(RefStore):
    """Refs as keys ``<prefix>refs/<name>`` holding the multibase hash (no newline)."""

    def __init__(self, bucket: S3Bucket, location: S3Location) -> None:
        self.bucket = bucket
        self.location = location
        self.folder = location.key("refs/")

    def __repr__(self) -> str:
        return f"S3RefStore({self.location.url}refs)"

    async def _read(self, name: str) -> tuple[Multihash | None, str | None]:
        found = await self.bucket.get(self.folder + name)
        if found is None:
            return None, None
        data, etag = found
        where = f"{self.location.url}refs/{name}"
        try:
            return Multihash.from_multibase(data.decode("utf-8").strip()), etag
        except (UnicodeDecodeError, ParseError) as err:
            raise CorruptRefError(f"ref {where} does not hold a multihash: {err}") from None

    async def get(self, name: str) -> Multihash | None:
        _check_name(name)
        return (await self._read(name))[0]

    async def set(self, name: str, new: Multihash, *, expected: Multihash | None) -> None:
        _check_name(name)
        where = f"ref {self.location.url}refs/{name}"
        actual, etag = await self._read(name)
        if actual != expected:
            raise RefCasError(where, expected, actual)
        body = object_name(new).encode("ascii")
        try:
            if actual is None:
                await self.bucket.put(self.folder + name, body, mode="create")
            else:
                await self.bucket.put(self.folder + name, body, mode={"e_tag": etag})
        except S3ConflictError:
            raise RefCasError(where, expected, (await self._read(name))[0]) from None

    async def delete(self, name: str, *, expected: Multihash | None) -> None:
        """S3 has no conditional delete: compared, then deleted (a writer in between loses)."""
        _check_name(name)
        actual, _ = await self._read(name)
        if actual != expected:
            raise RefCasError(f"ref {self.location.url}refs/{name}", expected, actual)
        await self.bucket.delete(self.folder + name)

    async def names(self) -> list[str]:
        names = []
        async for key in self.bucket.list_keys(self.folder):
            name = key[len(self.folder) :]
            if "/" not in name and not name.endswith(SIGNATURE_SUFFIX):
                names.append(name)
        return sorted(names)

    async def get_signature(self, name: str) -> bytes | None:
        _check_name(name)
        found = await self.bucket.get(f"{self.folder}{name}{SIGNATURE_SUFFIX}")
        return None if found is None else found[0][: MAX_SIGNATURE_BYTES + 1]

    async def set_signature(self, name: str, data: bytes) -> None:
        _check_name(name)
        await self.bucket.put(f"{self.folder}{name}{SIGNATURE_SUFFIX}", data)


class S3NamedStore(NamedStore):
    """``info/`` files as keys ``<prefix>info/<name>`` (a PUT replaces a key atomically)."""

    def __init__(self, bucket: S3Bucket, location: S3Location) -> None:
        self.bucket = bucket
        self.folder = location.key("info/")

    async def get(self, name: str) -> bytes | None:
        _check_name(name)
        found = await self.bucket.get(self.folder + name)
        return None if found is None else found[0]

    async def set(self, name: str, data: bytes) -> None:
        _check_name(name)
        await self.bucket.put(self.folder + name, data)

    async def delete(self, name: str) -> None:
        _check_name(name)
        await self.bucket.delete(self.folder + name)


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise StorageError(f"invalid ref or info file name {name!r}")


class _Hashing:
    """SHA3-256 of a body fed chunk by chunk: large chunks are hashed in a worker thread
    (hashlib lets go of the GIL) while the caller goes on, each after the one before."""

    def __init__(self) -> None:
        self._digest = hashlib.sha3_256()
        self._pending: asyncio.Future[None] | None = None

    async def add(self, chunk: Chunk) -> None:
        if self._pending is not None:
            await self._pending
            self._pending = None
        if len(chunk) >= _THREAD_HASH_MIN:
            self._pending = asyncio.ensure_future(asyncio.to_thread(self._digest.update, chunk))
        else:
            self._digest.update(chunk)

    async def result(self) -> Multihash:
        if self._pending is not None:
            await self._pending
            self._pending = None
        return Multihash(code=Multicodec.SHA3_256, digest=self._digest.digest())

    async def settle(self) -> None:
        """Wait out a hash still running (an upload that failed half-way)."""
        if self._pending is not None:
            await asyncio.gather(self._pending, return_exceptions=True)
            self._pending = None


async def _read_file(file: BinaryIO) -> AsyncIterator[bytes]:
    """The file in pieces of one upload part: a thread hop per part, not per megabyte."""
    while chunk := await asyncio.to_thread(file.read, PART_SIZE):
        yield chunk
