"""``ipfs://CID[/path]``: a dataset folder published to IPFS, read through the node's gateway
(sub-paths resolved through its RPC API). A CID names fixed content: it is read, never pushed to
(``ipns://`` is), and holds one dataset, not a repository to search. The IPFS client is imported
only when a remote is reached."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odfd.sync.errors import RemoteNotFoundError, SyncError, UnsupportedUrlError
from odfd.sync.transport.base import Listed, RemoteView, SourceHead, read_only_dataset
from odfd.sync.transport.plain import ThroughIpfsNode
from storage.ipfs_settings import IpfsSettings

if TYPE_CHECKING:
    import aiohttp
    from multiformats import CID

    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget
    from odfd.sync.walk import FetchBlock
    from protocol.identity import Multihash
    from protocol.transfer.simple import ObjectKind
    from storage.ipfs_client import IpfsClient, IpfsGateway
    from storage.stores.base import ObjectStore
    from storage.stores.ipfs import IpfsDatasetFolder


@dataclass(frozen=True, slots=True)
class IpfsTransport(ThroughIpfsNode):
    text: str
    cid: str
    subpath: str
    """Below the CID, ``""`` for the CID itself."""
    ipfs: IpfsSettings

    @asynccontextmanager
    async def open(self, session: aiohttp.ClientSession) -> AsyncIterator[RemoteView]:
        from protocol.errors import ParseError
        from storage.ipfs_client import parse_cid

        try:
            cid = parse_cid(self.cid)
        except ParseError as err:
            raise UnsupportedUrlError(f"{self.url}: {err}") from None
        async with gateway_view(session, cid, self.subpath, self.url, self.ipfs) as view:
            yield view

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        from odfd.sync.transport.probe import probe_view

        return await probe_view(self.open(session), self.url, known)

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.probe import refuse_push

        refuse_push(
            self.url, "cannot push to ipfs:// (a CID names fixed content); push to ipns:// instead"
        )

    async def list_datasets(self) -> list[Listed]:
        raise SyncError(f"{self.url}: searching ipfs:// is not possible")


@asynccontextmanager
async def gateway_view(
    session: aiohttp.ClientSession, cid: CID, subpath: str, where: str, ipfs: IpfsSettings
) -> AsyncIterator[RemoteView]:
    """The dataset folder at ``cid`` / ``subpath``, read through the gateway; its stores share
    one ``IpfsDatasetFolder`` (one listing of the root, one export per folder)."""
    from odfd.sync.objects import store_source
    from storage.ipfs_client import IpfsGateway
    from storage.stores.ipfs import IpfsDatasetFolder, IpfsObjectStore, IpfsRefStore

    async with IpfsGateway(ipfs.gateway, session=session) as gateway:
        folder = cid if not subpath else await _resolve_subpath(gateway, cid, subpath, where, ipfs)
        shared = IpfsDatasetFolder(folder, _client_of(ipfs))

        def store(kind: ObjectKind) -> IpfsObjectStore:
            return IpfsObjectStore(gateway, folder, kind, folder=shared)

        dataset = read_only_dataset(store, IpfsRefStore(gateway, folder))
        try:
            yield _IpfsView(
                dataset, f"{where} (/ipfs/{folder})", store_source(dataset), folder=shared
            )
        finally:
            await shared.aclose()


@dataclass(frozen=True, slots=True)
class _IpfsView(RemoteView):
    """A published folder: a walk that will read many blocks starts their export early."""

    folder: IpfsDatasetFolder = field(kw_only=True)

    @asynccontextmanager
    async def walk_blocks(
        self, local: ObjectStore | None, local_sequence: int | None = None
    ) -> AsyncIterator[FetchBlock]:
        """Into an empty dataset every block is read: the exports start at once. Else the
        first block fetched (the head) says how many the walk will read."""
        if local_sequence is not None and local_sequence < 0:
            self.folder.read_ahead()
        async with RemoteView.walk_blocks(self, local, local_sequence) as fetch:
            if local_sequence is None or local_sequence < 0:
                yield fetch
            else:
                yield _head_told(fetch, self.folder, local_sequence)

    def objects_ahead(self) -> AsyncIterator[tuple[Multihash, bytes]] | None:
        """The data files of the read-ahead's export (a walk into an empty dataset)."""
        return self.folder.data_ahead() if self.folder.reading_ahead else None


def _head_told(fetch: FetchBlock, folder: IpfsDatasetFolder, local_sequence: int) -> FetchBlock:
    """``fetch``, telling ``folder`` the first block it fetched."""
    told = False

    async def fetched(hash: Multihash) -> bytes:
        nonlocal told
        data = await fetch(hash)
        if not told:
            told = True
            folder.head_read(data, local_sequence)
        return data

    return fetched


def _client_of(ipfs: IpfsSettings) -> IpfsClient | None:
    """The node's RPC client, to list folders (``None``: the gateway alone is used)."""
    from protocol.errors import ParseError

    try:
        return ipfs.client()
    except ParseError:
        return None


async def _resolve_subpath(
    gateway: IpfsGateway, cid: CID, subpath: str, where: str, ipfs: IpfsSettings
) -> CID:
    node = cid
    for segment in subpath.split("/"):
        links = {link.name: link for link in await ipfs.client().ls(node)}
        if segment not in links:
            raise RemoteNotFoundError(f"{where}: /ipfs/{node} has no entry {segment!r}")
        node = links[segment].cid
    return node
