"""A dataset published to IPFS (a UnixFS folder in the spec's layout), as read-only stores.

Objects are read through the node's HTTP gateway at ``/ipfs/<cid>/<key>`` (streamed, with
ranges), the same keys as the Simple Transfer Protocol. The CID is resolved once (from
``ipfs://`` or by resolving ``ipns://``) so one pull reads one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from multiformats import CID

from protocol.errors import ParseError
from protocol.identity import Multihash
from protocol.transfer.simple import MAX_REF_BYTES, ObjectKind, object_key, parse_ref, ref_key
from storage.errors import ObjectNotFoundError
from storage.ipfs_client import IpfsGateway, IpfsNotFoundError
from storage.stores.localfs import MAX_SIGNATURE_BYTES, SIGNATURE_SUFFIX
from storage.stores.remote import ReadOnlyObjectStore, ReadOnlyRefStore, RemoteStoreError


class IpfsObjectStore(ReadOnlyObjectStore):
    def __init__(
        self, gateway: IpfsGateway, root: CID, kind: ObjectKind, *, max_bytes: int = 16 << 20
    ) -> None:
        self.gateway = gateway
        self.root = root
        self.kind = kind
        self.max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"IpfsObjectStore(/ipfs/{self.root}/{self.kind.value}/)"

    async def contains(self, hash: Multihash) -> bool:
        try:
            await self.gateway.get_ipfs(self.root, object_key(self.kind, hash), length=1)
        except IpfsNotFoundError:
            return False
        return True

    async def size(self, hash: Multihash) -> int:
        size = 0
        async for chunk in self.iter_chunks(hash):
            size += len(chunk)
        return size

    async def get_bytes(self, hash: Multihash) -> bytes:
        parts: list[bytes] = []
        total = 0
        async for chunk in self.iter_chunks(hash):
            total += len(chunk)
            if total > self.max_bytes:
                raise RemoteStoreError(f"{self!r}{hash} is larger than {self.max_bytes} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        path = f"/ipfs/{self.root}/{object_key(self.kind, hash)}"
        try:
            async for chunk in self.gateway.iter_chunks(path, chunk_size=chunk_size):
                yield chunk
        except IpfsNotFoundError:
            raise ObjectNotFoundError(repr(self), hash) from None


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
