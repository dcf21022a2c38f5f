"""``ipns://NAME[/path]``: the dataset folder an IPNS name points at, resolved through the
node's RPC API and then read as ``ipfs://`` is. A probe resolves the name only: the same CID as
last time means the same content, so nothing is read from the gateway. A push adds the folder to
IPFS and publishes it under the name's key (``ipns_push``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.sync.errors import SyncError, UnsupportedUrlError
from odfd.sync.transport.base import Listed, RemoteView, SourceHead
from odfd.sync.transport.ipfs import gateway_view
from odfd.sync.transport.plain import ThroughIpfsNode
from storage.ipfs_settings import IpfsSettings

if TYPE_CHECKING:
    import aiohttp
    from multiformats import CID

    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget


@dataclass(frozen=True, slots=True)
class IpnsTransport(ThroughIpfsNode):
    text: str
    name: str
    """A key's IPNS name, a key's name (for a push), or ``""``: the dataset's own key."""
    subpath: str
    ipfs: IpfsSettings

    async def resolve(self) -> CID:
        """The CID the name points at now."""
        from protocol.errors import ParseError
        from storage.ipfs_client import IpnsName

        try:
            name = IpnsName.parse(self.name)
        except ParseError as err:
            raise UnsupportedUrlError(f"{self.url}: {err}") from None
        return await self.ipfs.client().name_resolve(name)

    @asynccontextmanager
    async def open(self, session: aiohttp.ClientSession) -> AsyncIterator[RemoteView]:
        cid = await self.resolve()
        async with gateway_view(session, cid, self.subpath, self.url, self.ipfs) as view:
            yield view

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        from odfd.sync.transport.probe import probe_view

        cid = await self.resolve()
        if known is not None and known.cid == str(cid):
            return known
        opened = gateway_view(session, cid, self.subpath, self.url, self.ipfs)
        return await probe_view(opened, self.url, known, str(cid))

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.ipns_push import push_ipns

        return await push_ipns(self.url, self.name, self.subpath, self.ipfs, target, options)

    async def list_datasets(self) -> list[Listed]:
        raise SyncError(f"{self.url}: searching ipns:// is not possible")
