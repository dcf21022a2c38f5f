"""The seam every transport implements, and what reaching a remote gives.

A ``Transport`` is one remote (a dataset, or a repository of datasets) reached by one scheme. It
offers a ``RemoteView`` of the dataset as the Simple Transfer Protocol reads it (``refs/head``,
the signed head, blocks by hash for the walk, objects), the cheap head ``probe`` a mirror makes
before pulling, its ``push`` strategy, the datasets it lists (``odfd search``), the Smart Transfer
Protocol endpoint when it has one, and the peer a scheduler counts it against.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import unquote, urlsplit

from protocol.errors import ParseError
from protocol.identity import DatasetName, Multihash
from storage.layout import HEAD_REF

if TYPE_CHECKING:
    import aiohttp

    from odfd.sync.objects import ChunkSource
    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget
    from odfd.sync.walk import FetchBlock
    from protocol.transfer.simple import ObjectKind
    from storage.dataset import Dataset
    from storage.stores.base import ObjectStore, RefStore


@dataclass(frozen=True, slots=True)
class SourceHead:
    """What a head probe saw: the head, its sequence number, and for ``ipns://`` the CID the
    name resolved to (the same CID next time means the same content)."""

    head: Multihash
    sequence_number: int | None
    cid: str | None = None


@dataclass(frozen=True, slots=True)
class Listed:
    """A dataset a repository lists."""

    alias: str
    kind: str | None
    url: str


@dataclass(frozen=True, slots=True)
class SmartEndpoint:
    """Where a remote speaks the Smart Transfer Protocol (WebSockets at ``http_base`` +
    ``pull`` / ``push``, ``odfd.sync.transport.smart_client``)."""

    http_base: str
    token: str | None
    required: bool
    """No falling back to the Simple Transfer Protocol (``odf+http(s)://``, ``--protocol smart``)."""


@dataclass(frozen=True, slots=True)
class RemoteView:
    """A remote dataset opened for reading by the Simple Transfer Protocol; ``label`` names it in
    messages, ``objects`` fetches its data and checkpoint files (parallel HTTP downloads, or
    reads of its stores); ``lists_blocks``: its block store lists its keys cheaply (a bucket),
    so a walk reads blocks ahead."""

    dataset: Dataset
    label: str
    objects: ChunkSource
    lists_blocks: bool = False

    async def head(self) -> Multihash | None:
        return await self.dataset.refs.get(HEAD_REF)

    async def signed_head(self) -> bytes | None:
        """The owner's ``refs/head.sig`` document, if the remote holds one."""
        return await self.dataset.refs.get_signature(HEAD_REF)

    async def block(self, hash: Multihash) -> bytes:
        """A block's bytes, as received (the walk verifies them)."""
        return await self.dataset.blocks.get_bytes(hash)

    def objects_ahead(self) -> AsyncIterator[tuple[Multihash, bytes]] | None:
        """Data files the remote sends before any block names them, each with the hash it is
        named by (an IPFS export of the ``data/`` folder); ``None``: it sends none."""
        return None

    @asynccontextmanager
    async def walk_blocks(
        self, local: ObjectStore | None, local_sequence: int | None = None
    ) -> AsyncIterator[FetchBlock]:
        """How a walk into ``local`` (whose head has ``local_sequence``, -1 for none) reads
        blocks: ``block``, or where the remote lists its blocks, a read-ahead of those ``local``
        lacks (``odfd.sync.block_read_ahead``), stopped when the walk leaves."""
        if not self.lists_blocks:
            yield self.block
            return
        from odfd.sync.block_read_ahead import BlockReadAhead

        async def held_locally(hash: Multihash) -> bool:
            return local is not None and await local.contains(hash)

        async with BlockReadAhead(
            self.dataset.blocks.iter_hashes,
            self.block,
            held_locally,
            local_sequence=local_sequence,
        ) as ahead:
            yield ahead.get


class Transport(Protocol):
    """One remote reached by one scheme (``odfd.sync.transport.url.parse_remote`` gives one)."""

    @property
    def url(self) -> str:
        """The canonical URL: how the remote is recorded (catalog, ``info/config``) and named."""
        ...

    @property
    def smart(self) -> SmartEndpoint | None:
        """The remote's Smart Transfer Protocol endpoint, if it has one."""
        ...

    def default_name(self) -> DatasetName | None:
        """The name a dataset pulled from here gets unless told otherwise."""
        ...

    def peer_key(self) -> str:
        """Whom reaching this remote loads (``[sync] max_per_peer`` counts by it)."""
        ...

    def open(self, session: aiohttp.ClientSession) -> AbstractAsyncContextManager[RemoteView]:
        """The remote dataset; ``RemoteNotFoundError`` / the store's error when unreachable."""
        ...

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        """The head now, as cheaply as the transport can tell (``known``: the previous probe)."""
        ...

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        """Bring the remote to ``target``'s head (after comparing histories) and hand it the
        signed head where the remote keeps one; ``UnsupportedUrlError`` if it cannot be written."""
        ...

    async def list_datasets(self) -> list[Listed]:
        """The datasets this remote holds as a repository (``odfd search``)."""
        ...


def name_from_url(url: str) -> DatasetName | None:
    """The URL's last path segment, if it is a valid dataset name (as the reference names a
    dataset pulled from a URL)."""
    segment = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    try:
        return DatasetName.parse(unquote(segment)) if segment else None
    except ParseError:
        return None


def read_only_dataset(stores: Callable[[ObjectKind], ObjectStore], refs: RefStore) -> Dataset:
    """A remote's stores as a dataset (without ``info/``: a remote's own settings are not read)."""
    from protocol.transfer.simple import ObjectKind
    from storage.dataset import Dataset
    from storage.stores.remote import AbsentNamedStore

    return Dataset(
        blocks=stores(ObjectKind.BLOCK),
        data=stores(ObjectKind.DATA),
        checkpoints=stores(ObjectKind.CHECKPOINT),
        refs=refs,
        info=AbsentNamedStore(),
    )
