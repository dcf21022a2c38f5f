"""``did:odf:…``: a dataset found by its DID alone. The DID's key is also an IPNS name
(``odfd.sync.did_names``); the owner's signed record it resolves to is fetched through the IPFS
node and verified by odfd against the DID, then the folder it points at is read as ``ipfs://``
is (and its signed head checked, as every pull does)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.sync.errors import SyncError
from odfd.sync.transport.base import Listed, RemoteView, SourceHead, Transport
from odfd.sync.transport.ipfs import gateway_view
from odfd.sync.transport.plain import ThroughIpfsNode
from protocol.identity import DatasetId, DatasetName
from storage.ipfs_settings import IpfsSettings

if TYPE_CHECKING:
    import aiohttp

    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget


@dataclass(frozen=True, slots=True)
class DidTransport(ThroughIpfsNode):
    dataset_id: DatasetId
    ipfs: IpfsSettings

    @property
    def url(self) -> str:
        return str(self.dataset_id)

    def default_name(self) -> DatasetName | None:
        """The DID's key in multibase: unique, and all a user who only knows the DID has."""
        return DatasetName.parse(self.dataset_id.to_multibase())

    @asynccontextmanager
    async def open(self, session: aiohttp.ClientSession) -> AsyncIterator[RemoteView]:
        from odfd.sync.did_names import resolve_did

        resolved = await resolve_did(self.ipfs, self.dataset_id)
        async with gateway_view(session, resolved.cid, "", self.url, self.ipfs) as view:
            yield view

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        from odfd.sync.did_names import resolve_did
        from odfd.sync.transport.probe import probe_view

        cid = (await resolve_did(self.ipfs, self.dataset_id)).cid
        if known is not None and known.cid == str(cid):
            return known
        opened = gateway_view(session, cid, "", self.url, self.ipfs)
        return await probe_view(opened, self.url, known, str(cid))

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.probe import refuse_push

        refuse_push(
            self.url, "a DID is published to with `odfd push DATASET ipns://` on its owner's node"
        )

    async def list_datasets(self) -> list[Listed]:
        raise SyncError(f"{self.url}: a DID names one dataset, not a repository to search")


def owner_of(remote: Transport) -> DatasetId | None:
    """The dataset ``remote`` was named by, when it is a DID: what it serves must be that
    dataset's history under its owner's signed head."""
    return remote.dataset_id if isinstance(remote, DidTransport) else None
