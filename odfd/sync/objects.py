"""Moving data and checkpoint files: which ones a run of blocks needs, and fetching the missing
ones in parallel with retries, each checked against its size and physical hash on the way in.

An object is read only up to one byte past its advertised size (whatever the HTTP framing,
within the time-outs of ``storage.stores.http_fetch``; a stalled object is not retried), hashed while it is written to a
staging file, and kept only if hash and size match, so a lying source can neither plant wrong
bytes nor make us read without end. What is kept is named in batches (``StagedObjects``): when
the pull commits, when it is interrupted (so the next pull resumes from it), and whenever
``NAME_EVERY`` bytes wait unnamed (bounding what a killed process loses). Objects already present
(from an earlier, interrupted pull) are not fetched again.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from odfd.sync.errors import AccessDeniedError, CorruptSourceError, SyncError
from odfd.sync.walk import VerifiedBlock
from protocol.identity import Multihash
from protocol.model import AddData, ExecuteTransform
from protocol.transfer.simple import ObjectKind
from storage.dataset import Dataset
from storage.errors import HashMismatchError, ObjectNotFoundError
from storage.stores.base import Chunk, ObjectStore, StagedObjects
from storage.stores.http_fetch import StalledError, iter_body, open_get
from storage.stores.http_limits import HttpLimits
from storage.stores.localfs import LocalFsObjectStore
from storage.stores.remote import RemoteStoreError, RemoteUnavailableError

DEFAULT_PARALLEL = 8
DEFAULT_RETRIES = 3
NAME_EVERY = 256 << 20
"""Bytes fetched and not yet named after which a pull names them (see the module docstring)."""
_CHUNK = 1 << 20
_STORE_CHUNK = 8 << 20
"""Stores hand out whole pieces (an S3 ranged read, a file read): fewer hops per object."""
_RETRY_DELAY = 0.25
_TRANSIENT = (
    RemoteUnavailableError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    TimeoutError,
    ConnectionError,
)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: ObjectKind
    hash: Multihash
    size: int

    def __str__(self) -> str:
        return f"{self.kind.value}/{self.hash}"


def objects_of(blocks: Iterable[VerifiedBlock]) -> list[ObjectRef]:
    """The data and checkpoint files the blocks name, each once, oldest block first."""
    seen: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}
    for item in blocks:
        event = item.block.event
        if not isinstance(event, (AddData, ExecuteTransform)):
            continue
        if event.new_data is not None:
            ref = ObjectRef(ObjectKind.DATA, event.new_data.physical_hash, event.new_data.size)
            seen.setdefault((ref.kind, ref.hash), ref)
        if event.new_checkpoint is not None:
            ref = ObjectRef(
                ObjectKind.CHECKPOINT, event.new_checkpoint.physical_hash, event.new_checkpoint.size
            )
            seen.setdefault((ref.kind, ref.hash), ref)
    return list(seen.values())


async def _as_async(
    refs: Sequence[ObjectRef] | AsyncIterable[ObjectRef],
) -> AsyncIterator[ObjectRef]:
    if isinstance(refs, Sequence):
        for ref in refs:
            yield ref
    else:
        async for ref in refs:
            yield ref


def first_error(errors: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error a pull reports from tasks that failed together (its downloads, its walk):
    a lying source first (it decides whether what arrived is kept), then anything but a
    cancellation, in the order they were raised."""
    leaves: list[BaseException] = []

    def collect(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                collect(inner)
        else:
            leaves.append(error)

    collect(errors)
    leaves.sort(
        key=lambda e: (not isinstance(e, CorruptSourceError), isinstance(e, asyncio.CancelledError))
    )
    return leaves[0]


async def _one_chunk(data: bytes) -> AsyncIterator[Chunk]:
    yield data


def store_for(dataset: Dataset, kind: ObjectKind) -> ObjectStore:
    return dataset.data if kind is ObjectKind.DATA else dataset.checkpoints


async def missing_objects(
    dataset: Dataset,
    refs: Sequence[ObjectRef],
    held: Mapping[ObjectKind, set[Multihash]] | None = None,
) -> list[ObjectRef]:
    """Those of ``refs`` not stored in ``dataset`` with the right size (``held``: each kind's
    objects listed beforehand; one it lacks is missing without asking the store)."""
    missing = []
    for ref in refs:
        if held is not None and ref.hash not in held[ref.kind]:
            missing.append(ref)
            continue
        try:
            present = await store_for(dataset, ref.kind).size(ref.hash) == ref.size
        except ObjectNotFoundError:
            present = False
        if not present:
            missing.append(ref)
    return missing


ChunkSource = Callable[[ObjectRef], AbstractAsyncContextManager[AsyncIterator[Chunk]]]
"""Opens a stream of an object's bytes that reads at most ``size + 1`` bytes."""


async def bounded(
    chunks: AsyncIterator[Chunk],
    ref: ObjectRef,
    where: str,
    on_bytes: Callable[[int], None] | None = None,
) -> AsyncIterator[Chunk]:
    """Pass chunks through, failing as soon as more than ``ref.size`` bytes arrive or when the
    stream ends short."""
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > ref.size:
            raise CorruptSourceError(
                f"{where}: {ref} is larger than the {ref.size} bytes its block records"
            )
        if on_bytes is not None:
            on_bytes(len(chunk))
        yield chunk
    if total != ref.size:
        raise CorruptSourceError(f"{where}: {ref} has {total} bytes, its block records {ref.size}")


class _StoreChunks:
    """Chunks of an object read from a store (file://, IPFS or S3 sources)."""

    def __init__(self, store: ObjectStore, ref: ObjectRef) -> None:
        self._store = store
        self._ref = ref

    async def __aenter__(self) -> AsyncIterator[Chunk]:
        return self._store.iter_chunks(self._ref.hash, min(_STORE_CHUNK, self._ref.size + 1))

    async def __aexit__(self, *exc: object) -> None:
        return None


class StoreSource:
    """Objects read from another dataset's stores. An object that is a local file (a push from
    this node, a pull from ``file://``) goes to its destination by path, so a store that uploads
    from files (S3: obstore's multipart upload) reads it once, in large pieces."""

    def __init__(self, source: Dataset) -> None:
        self.source = source

    def __call__(self, ref: ObjectRef) -> AbstractAsyncContextManager[AsyncIterator[Chunk]]:
        return _StoreChunks(store_for(self.source, ref.kind), ref)

    def local_file(self, ref: ObjectRef) -> Path | None:
        store = store_for(self.source, ref.kind)
        return store.path_of(ref.hash) if isinstance(store, LocalFsObjectStore) else None


def store_source(source: Dataset) -> StoreSource:
    return StoreSource(source)


class _HttpChunks:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        headers: dict[str, str],
        ref: ObjectRef,
        limits: HttpLimits,
    ) -> None:
        self._session = session
        self._url = url
        self._headers = headers
        self._ref = ref
        self._limits = limits
        self._opened: AbstractAsyncContextManager[aiohttp.ClientResponse] | None = None

    async def __aenter__(self) -> AsyncIterator[Chunk]:
        self._opened = open_get(
            self._session, self._url, headers=self._headers, limits=self._limits
        )
        response = await self._opened.__aenter__()
        try:
            self._check_status(response.status)
        except BaseException:
            await self._opened.__aexit__(None, None, None)
            raise
        return iter_body(response, self._ref.size + 1, what=f"{self._ref}", limits=self._limits)

    def _check_status(self, status: int) -> None:
        if status == 404:
            raise ObjectNotFoundError(self._url, self._ref.hash)
        if status in (401, 403):
            raise AccessDeniedError(f"GET {self._url} was refused ({status})")
        if status >= 500:
            raise RemoteUnavailableError(f"GET {self._url} answered {status}")
        if status >= 400:
            raise RemoteStoreError(f"GET {self._url} answered {status}")

    async def __aexit__(self, *exc: object) -> None:
        if self._opened is not None:
            await self._opened.__aexit__(None, None, None)


def http_source(
    session: aiohttp.ClientSession,
    url_of: Callable[[ObjectRef], tuple[str, dict[str, str]]],
    limits: HttpLimits | None = None,
) -> ChunkSource:
    """Objects read by HTTP GET from the URL (and headers) ``url_of`` gives for each."""

    def open(ref: ObjectRef) -> _HttpChunks:
        url, headers = url_of(ref)
        return _HttpChunks(session, url, headers, ref, limits or HttpLimits())

    return open


class ObjectFetcher:
    """Fetches objects into a dataset, ``parallel`` at a time, retrying transient failures.

    Fetched objects are written to one ``StagedObjects`` batch per store and named when
    ``fetch_all`` ends, or, with ``defer_naming`` (a pull, which checks them first), by
    ``name_fetched`` (until then ``readable_path`` says where to read one). ``on_done(ref)``
    runs after each object is written and checked; ``on_bytes(n)`` as bytes arrive.
    """

    def __init__(
        self,
        dest: Dataset,
        *,
        where: str,
        parallel: int = DEFAULT_PARALLEL,
        retries: int = DEFAULT_RETRIES,
        on_done: Callable[[ObjectRef], Awaitable[None]] | None = None,
        on_bytes: Callable[[int], None] | None = None,
        defer_naming: bool = False,
    ) -> None:
        if parallel < 1 or retries < 1:
            raise SyncError("parallel downloads and attempts must be at least 1")
        self.dest = dest
        self.where = where
        self.parallel = parallel
        self.retries = retries
        self.on_done = on_done
        self.on_bytes = on_bytes
        self.defer_naming = defer_naming
        self.added: list[ObjectRef] = []
        self._batches: dict[ObjectKind, StagedObjects] = {}
        self._ahead: dict[Multihash, asyncio.Future[int | None]] = {}
        """Data files staged before a block named them (``stage_ahead``) -> their size once
        written (``None``: not kept); taken by ``fetch_one``, the rest dropped at naming."""
        self._ahead_listed: asyncio.Event | None = None
        """Set once every data file staged ahead is in ``_ahead`` (``None``: none is)."""

    def _batch(self, kind: ObjectKind) -> StagedObjects:
        if kind not in self._batches:
            self._batches[kind] = store_for(self.dest, kind).staged()
        return self._batches[kind]

    def readable_path(self, ref: ObjectRef) -> Path | None:
        """Where a fetched object not yet named can be read (``None``: it is named, or was not
        fetched by this fetcher)."""
        batch = self._batches.get(ref.kind)
        return batch.readable_path(ref.hash) if batch is not None else None

    async def name_fetched(self) -> None:
        """Make every object fetched so far durable and give it its name (data files staged
        ahead that no block named are dropped first: only what a block reaches is kept)."""
        # One a block named may have been fetched by name before it was staged ahead: kept.
        fetched = {ref.hash for ref in self.added}
        unnamed = [h for h, staged in self._ahead.items() if staged.done() and h not in fetched]
        if unnamed and ObjectKind.DATA in self._batches:
            for hash in unnamed:
                del self._ahead[hash]
            await self._batches[ObjectKind.DATA].discard(unnamed)
        for batch in self._batches.values():
            await batch.commit()

    async def stage_ahead(
        self,
        objects: AsyncIterable[tuple[Multihash, bytes]],
        on_staged: Callable[[ObjectRef], None] | None = None,
    ) -> None:
        """Write data files a source sent before any block named them (an IPFS export of the
        whole ``data/`` folder) to staging, ``parallel`` at a time, each checked against the
        hash it is named by (``on_staged`` runs after each). ``fetch_one`` takes one when a
        block names it (its size checked then); naming drops those no block named."""
        limit = asyncio.Semaphore(self.parallel)
        listed = self._ahead_listed = asyncio.Event()

        async def one(hash: Multihash, data: bytes, staged: asyncio.Future[int | None]) -> None:
            size = None
            try:
                await self._batch(ObjectKind.DATA).put_stream(_one_chunk(data), expected=hash)
                size = len(data)
                if on_staged is not None:
                    on_staged(ObjectRef(ObjectKind.DATA, hash, size))
            except HashMismatchError:
                pass  # not kept: fetched by name (and refused there) if a block wants it
            finally:
                staged.set_result(size)
                limit.release()

        try:
            async with asyncio.TaskGroup() as group:
                async for hash, data in objects:
                    if hash in self._ahead:
                        continue
                    staged = self._ahead[hash] = asyncio.get_running_loop().create_future()
                    await limit.acquire()
                    group.create_task(one(hash, data, staged))
                listed.set()
        except BaseExceptionGroup as group:
            raise first_error(group) from None
        finally:
            listed.set()

    async def _take_ahead(self, ref: ObjectRef) -> bool:
        """Whether ``ref`` was staged ahead (now taken: kept at naming); its size must be the
        one its block records. Asked before the source's list of them is in, it waits for it
        (else a file on its way would be fetched by name)."""
        if ref.kind is ObjectKind.DATA and self._ahead_listed is not None:
            await self._ahead_listed.wait()
        staged = self._ahead.pop(ref.hash, None) if ref.kind is ObjectKind.DATA else None
        size = None if staged is None else await asyncio.shield(staged)
        if size is None:
            return False
        if size != ref.size:
            await self._batch(ref.kind).discard((ref.hash,))
            raise CorruptSourceError(
                f"{self.where}: {ref} has {size} bytes, its block records {ref.size}"
            )
        if self.on_bytes is not None:
            self.on_bytes(size)
        return True

    async def fetch_all(
        self, refs: Sequence[ObjectRef] | AsyncIterable[ObjectRef], source: ChunkSource
    ) -> None:
        """Fetch ``refs``; an async iterable is fetched as it yields (a pull names objects
        while it still walks the chain), ``parallel`` at a time, until it ends."""
        if isinstance(refs, Sequence) and not refs:
            return
        limit = asyncio.Semaphore(self.parallel)

        async def one(ref: ObjectRef) -> None:
            try:
                await self.fetch_one(ref, source)
            finally:
                limit.release()

        try:
            async with asyncio.TaskGroup() as group:
                async for ref in _as_async(refs):
                    await limit.acquire()
                    group.create_task(one(ref))
        except BaseExceptionGroup as group:
            raise first_error(group) from None
        finally:
            if not self.defer_naming:
                await self.name_fetched()

    async def fetch_one(self, ref: ObjectRef, source: ChunkSource) -> None:
        batch = self._batch(ref.kind)
        # Recorded before the write: a write cancelled half-way may still have stored it.
        self.added.append(ref)
        if not await self._take_ahead(ref):
            await self._fetch(batch, ref, source)
        if self.on_done is not None:
            await self.on_done(ref)
        if sum(batch.staged_bytes for batch in self._batches.values()) >= NAME_EVERY:
            await self.name_fetched()

    async def _fetch(self, batch: StagedObjects, ref: ObjectRef, source: ChunkSource) -> None:
        local = source.local_file(ref) if isinstance(source, StoreSource) else None
        for attempt in range(1, self.retries + 1):
            try:
                if local is not None:
                    stored = await self._put_file(batch, ref, local)
                    break
                async with source(ref) as chunks:
                    stored = await batch.put_stream(
                        bounded(chunks, ref, self.where, self.on_bytes), expected=ref.hash
                    )
                break
            except HashMismatchError as err:
                raise CorruptSourceError(
                    f"{self.where}: {ref} arrived with bytes that hash to {err.actual}"
                ) from None
            except ObjectNotFoundError:
                raise CorruptSourceError(
                    f"{self.where}: a block names {ref}, which the remote does not serve"
                ) from None
            except StalledError as err:
                raise StalledError(f"{self.where}: fetching {err}") from None
            except _TRANSIENT as err:
                if attempt == self.retries:
                    raise RemoteUnavailableError(
                        f"{self.where}: fetching {ref} failed {attempt} times: "
                        f"{err or type(err).__name__}"
                    ) from None
                await asyncio.sleep(_RETRY_DELAY * 2 ** (attempt - 1))
        assert stored == ref.hash  # put_stream checked it

    async def _put_file(self, batch: StagedObjects, ref: ObjectRef, path: Path) -> Multihash:
        """A local file's size is checked before it is stored; ``put_file`` checks its hash
        on the bytes it stores (and fails before an upload completes)."""
        try:
            size = (await asyncio.to_thread(path.stat)).st_size
        except FileNotFoundError:
            raise ObjectNotFoundError(str(path), ref.hash) from None
        if size != ref.size:
            raise CorruptSourceError(
                f"{self.where}: {ref} has {size} bytes, its block records {ref.size}"
            )
        stored = await batch.put_file(path, ref.hash)
        if self.on_bytes is not None:
            self.on_bytes(size)
        return stored

    async def discard_added(self) -> None:
        """Remove what this fetcher wrote (after the source proved untrustworthy)."""
        for batch in self._batches.values():
            await batch.abort()
        for ref in self.added:
            await store_for(self.dest, ref.kind).delete(ref.hash)
        self.added.clear()
