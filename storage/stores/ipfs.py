"""A dataset published to IPFS (a UnixFS folder in the spec's layout), as read-only stores.

Objects are read through the node's HTTP gateway at ``/ipfs/<cid>/<key>`` (streamed, with
ranges), the same keys as the Simple Transfer Protocol. The CID is resolved once (from
``ipfs://`` or by resolving ``ipns://``) so one pull reads one consistent snapshot.

Resolving ``<cid>/blocks/<name>`` walks a large (sharded) folder on every request, which costs a
node several times what serving a file by its own CID does. So once a pull has read more than
``LIST_AFTER`` objects of one folder, the folder is listed once (names and CIDs, one RPC call)
and its objects are read as ``/ipfs/<object cid>``; a name the listing lacks is missing (the
folder is immutable). Blocks, which a chain walk reads one after another, come instead from one
export of their folder (``dag/export``: every block in one stream, a fraction of the node's work
per block of one request each), named by hashing them. Nothing read this way is trusted: the
caller checks every block's and object's bytes against the hash that names it, as for any remote.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Protocol

from multiformats import CID

from protocol.errors import ParseError
from protocol.identity import Multihash
from protocol.transfer.simple import MAX_REF_BYTES, ObjectKind, object_key, parse_ref, ref_key
from storage.errors import ObjectNotFoundError
from storage.ipfs_client import IpfsError, IpfsGateway, IpfsNotFoundError
from storage.stores.localfs import MAX_SIGNATURE_BYTES, SIGNATURE_SUFFIX
from storage.stores.remote import ReadOnlyObjectStore, ReadOnlyRefStore, RemoteStoreError


class IpfsFolderReader(Protocol):
    """What the stores need of the node's RPC API (``storage.ipfs_client.IpfsClient``)."""

    async def ls_names(self, path: CID | str) -> dict[str, str]: ...

    async def export_raw_blocks(self, cid: CID | str, *, max_bytes: int) -> dict[bytes, bytes]: ...


LIST_AFTER = 16
"""Objects of a folder read by path before the folder is listed (an incremental pull of a few
blocks does not pay for listing or exporting thousands)."""
EXPORT_MAX_BYTES = 256 << 20
"""Most bytes of blocks held from one export; blocks beyond are read one by one."""


@dataclass(frozen=True, slots=True)
class _Listed:
    entries: dict[str, str] | None
    """Name -> CID (text) of the folder's files; ``None``: not listed (blocks), read by path."""
    exported: dict[str, bytes]
    """Name (its SHA3-256 multihash, as a block's name is) -> bytes of every single-block file
    of one export (blocks only)."""


class IpfsObjectStore(ReadOnlyObjectStore):
    def __init__(
        self,
        gateway: IpfsGateway,
        root: CID,
        kind: ObjectKind,
        *,
        max_bytes: int = 16 << 20,
        rpc: IpfsFolderReader | None = None,
    ) -> None:
        self.gateway = gateway
        self.root = root
        self.kind = kind
        self.max_bytes = max_bytes
        self._rpc = rpc
        self._by_path = 0
        self._listing: asyncio.Future[_Listed | None] | None = None

    def __repr__(self) -> str:
        return f"IpfsObjectStore(/ipfs/{self.root}/{self.kind.value}/)"

    async def contains(self, hash: Multihash) -> bool:
        try:
            await self.gateway.get(await self._path(hash), length=1)
        except (IpfsNotFoundError, ObjectNotFoundError):
            return False
        return True

    async def size(self, hash: Multihash) -> int:
        size = 0
        async for chunk in self.iter_chunks(hash):
            size += len(chunk)
        return size

    async def get_bytes(self, hash: Multihash) -> bytes:
        listed = await self._listed()
        if listed is not None:
            data = listed.exported.pop(hash.to_multibase(), None)
            if data is not None:  # taken once: a walk reads each block once
                if len(data) > self.max_bytes:
                    raise RemoteStoreError(f"{self!r}{hash} is larger than {self.max_bytes} bytes")
                return data
        parts: list[bytes] = []
        total = 0
        async for chunk in self.iter_chunks(hash):
            total += len(chunk)
            if total > self.max_bytes:
                raise RemoteStoreError(f"{self!r}{hash} is larger than {self.max_bytes} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        path = await self._path(hash)
        try:
            async for chunk in self.gateway.iter_chunks(path, chunk_size=chunk_size):
                yield chunk
        except IpfsNotFoundError:
            raise ObjectNotFoundError(repr(self), hash) from None

    async def _path(self, hash: Multihash) -> str:
        """``/ipfs/<object cid>`` once the folder is listed, else the object's path below the
        dataset's CID."""
        listed = await self._listed()
        if listed is None or listed.entries is None:
            return f"/ipfs/{self.root}/{object_key(self.kind, hash)}"
        cid = listed.entries.get(hash.to_multibase())
        if cid is None:
            raise ObjectNotFoundError(repr(self), hash)
        return f"/ipfs/{cid}"

    async def _listed(self) -> _Listed | None:
        if self._listing is None:
            if self._rpc is None:
                return None
            self._by_path += 1
            if self._by_path <= LIST_AFTER:
                return None
            self._listing = asyncio.ensure_future(self._list(self._rpc))
        return await asyncio.shield(self._listing)

    async def _list(self, rpc: IpfsFolderReader) -> _Listed | None:
        try:
            folder = (await rpc.ls_names(f"/ipfs/{self.root}")).get(self.kind.value)
            if folder is None:
                return _Listed({}, {})
            if self.kind is not ObjectKind.BLOCK:
                return _Listed(await rpc.ls_names(folder), {})
            # A chain's blocks are many and small: one export, named by hashing each (listing
            # the folder too would cost the node as much again); a block the export lacks is
            # read by path.
            exported = await rpc.export_raw_blocks(folder, max_bytes=EXPORT_MAX_BYTES)
        except IpfsError:
            return None  # no RPC API to list with (a gateway alone): keep reading by path
        return _Listed(None, await asyncio.to_thread(_by_name, exported.values()))

    async def aclose(self) -> None:
        """Drops what was exported and not taken."""
        if self._listing is not None and not self._listing.done():
            self._listing.cancel()
            await asyncio.gather(self._listing, return_exceptions=True)
        self._listing = None
        self._rpc = None


class IpfsRefStore(ReadOnlyRefStore):
    def __init__(self, gateway: IpfsGateway, root: CID) -> None:
        self.gateway = gateway
        self.root = root

    def __repr__(self) -> str:
        return f"IpfsRefStore(/ipfs/{self.root}/refs/)"

    async def get(self, name: str) -> Multihash | None:
        key = ref_key(name)
        try:
            body = await self.gateway.get_ipfs(self.root, key, length=MAX_REF_BYTES + 1)
        except IpfsNotFoundError:
            return None
        try:
            return parse_ref(body, f"/ipfs/{self.root}/{key}")
        except ParseError as err:
            raise RemoteStoreError(str(err)) from None

    async def get_signature(self, name: str) -> bytes | None:
        key = f"{ref_key(name)}{SIGNATURE_SUFFIX}"
        try:
            return await self.gateway.get_ipfs(self.root, key, length=MAX_SIGNATURE_BYTES + 1)
        except IpfsNotFoundError:
            return None


def _by_name(blocks: Iterable[bytes]) -> dict[str, bytes]:
    return {Multihash.from_digest_sha3_256(data).to_multibase(): data for data in blocks}
