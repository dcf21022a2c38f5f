"""A dataset published to IPFS (a UnixFS folder in the spec's layout), as read-only stores.

Objects are read through the node's HTTP gateway at ``/ipfs/<cid>/<key>`` (streamed, with
ranges), the same keys as the Simple Transfer Protocol. The CID is resolved once (from
``ipfs://`` or by resolving ``ipns://``) so one pull reads one consistent snapshot.

Resolving ``<cid>/blocks/<name>`` walks a large (sharded) folder on every request, and any
gateway request costs a node several times what one block of an export does (js-ipfs: ~2.5 ms of
its CPU per 34 KB data file by CID, ~0.1 ms per file exported). So once a pull has read more
than ``LIST_AFTER`` objects of one folder, the folder is exported once (``dag/export``: every
block in one stream) and its single-block files are named by hashing them: every block of a
chain, and every data file that fits one chunk. An object the export lacks (a file of several
chunks, or beyond the bytes held) is read as ``/ipfs/<object cid>`` from one listing of the
folder (names and CIDs, one RPC call, made only then), a block by path; a name the listing lacks
is missing (the folder is immutable). Nothing read this way is trusted: the caller checks every
block's and object's bytes against the hash that names it, as for any remote.

The stores of one dataset folder share an ``IpfsDatasetFolder``: one listing of the dataset's
root (which names each kind's folder) and each folder's one export. A walk into an empty dataset
reads every block, so it starts the blocks' and the data files' exports at once
(``read_ahead``; the pull takes the data files as soon as their export ended, ``data_ahead``,
and stages and checks them while the node still exports the blocks), and a walk whose head is
more than ``LIST_AFTER`` blocks above the local head starts the blocks' export after reading the
head (``head_read``), instead of reading blocks by path first: each such read walks the folder
(~30 ms of js-ipfs's CPU for a block of a 10,000-block folder, against ~0.2 ms per block
exported).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from multiformats import CID

from protocol.codec.flatbuffers import peek_transfer_facts
from protocol.errors import DecodeError, ParseError
from protocol.identity import Multihash
from protocol.transfer.simple import MAX_REF_BYTES, ObjectKind, object_key, parse_ref, ref_key
from storage.errors import ObjectNotFoundError
from storage.ipfs_client import IpfsError, IpfsGateway, IpfsNotFoundError
from storage.stores.localfs import MAX_SIGNATURE_BYTES, SIGNATURE_SUFFIX
from storage.stores.remote import ReadOnlyObjectStore, ReadOnlyRefStore, RemoteStoreError


class IpfsFolderReader(Protocol):
    """What the stores need of the node's RPC API (``storage.ipfs_client.IpfsClient``)."""

    async def ls_names(self, path: CID | str) -> dict[str, str]: ...

    async def export_raw_blocks(
        self, cid: CID | str, *, max_bytes: int, stop_at_file_node: bool = False
    ) -> dict[bytes, bytes]: ...


LIST_AFTER = 16
"""Objects of a folder read by path before the folder is exported (an incremental pull of a few
blocks does not pay for listing or exporting thousands)."""
EXPORT_MAX_BYTES = 256 << 20
"""Most bytes of blocks held from one export; blocks beyond are read one by one."""
DATA_EXPORT_MAX_BYTES = 128 << 20
"""Most bytes of data files (or checkpoints) held from one export, read before the first is
taken; files beyond are read one by one by CID."""


@dataclass(slots=True)
class _Listed:
    folder: str | None
    """CID (text) of the kind's folder; ``None``: the dataset has no such folder."""
    exported: dict[str, bytes]
    """Name (its SHA3-256 multihash, as a block's and a data file's name is) -> bytes of every
    single-block file of one export of the folder."""
    entries: asyncio.Future[dict[str, str] | None] | None = None
    """Name -> CID (text) of the folder's files, listed at the first name the export lacks
    (never for blocks; ``None`` inside: the listing failed, read by path)."""


class IpfsDatasetFolder:
    """What the stores of one published dataset folder read through the node's RPC API, once
    for all of them: the root's listing and each kind's export (started by the first store that
    wants it, or by ``read_ahead``)."""

    def __init__(self, root: CID, rpc: IpfsFolderReader | None) -> None:
        self.root = root
        self.rpc = rpc
        self._root_listing: asyncio.Future[dict[str, str]] | None = None
        self._exports: dict[ObjectKind, asyncio.Future[_Listed | None]] = {}
        self._ahead: asyncio.Future[_Listed | None] | None = None

    def exporting(self, kind: ObjectKind) -> bool:
        return kind in self._exports

    def export(self, kind: ObjectKind) -> asyncio.Future[_Listed | None]:
        """The kind's folder exported (``None`` inside: no RPC API to export with, read by
        path); started at the first call."""
        listing = self._exports.get(kind)
        if listing is None:
            listing = self._exports[kind] = asyncio.ensure_future(self._export(kind))
        return listing

    def read_ahead(self) -> None:
        """Start exporting the blocks and the data files at once (a pull into an empty dataset
        reads them all; the node sends the data files' export, ~0.4 s, while it still walks the
        blocks' sharded folder, ~3 s, without slowing it); checkpoints stay read as asked (a
        pull may need few of them)."""
        if self.rpc is not None and self._ahead is None:
            self.export(ObjectKind.BLOCK)
            self._ahead = self.export(ObjectKind.DATA)

    @property
    def reading_ahead(self) -> bool:
        return self._ahead is not None

    async def data_ahead(self) -> AsyncIterator[tuple[Multihash, bytes]]:
        """The data files of the read-ahead's export with the hash each is named by, taken as
        soon as it ended (nothing if there is none): a pull stages them while the node still
        exports the blocks, and keeps those a block names."""
        listed = None if self._ahead is None else await asyncio.shield(self._ahead)
        if listed is None:
            return
        taken, listed.exported = listed.exported, {}
        while taken:
            name, data = taken.popitem()
            yield Multihash.from_multibase(name), data

    def head_read(self, head: bytes, local_sequence: int) -> None:
        """The first block a walk fetched: if its sequence number puts more than ``LIST_AFTER``
        blocks above the local head, the blocks' export starts now instead of after that many
        reads by path. The number is read before the walk checks the block: a remote lying
        about it can only make the walk export."""
        try:
            sequence_number = peek_transfer_facts(head).sequence_number
        except DecodeError:
            return  # the walk reports it
        if self.rpc is not None and sequence_number - local_sequence > LIST_AFTER:
            self.export(ObjectKind.BLOCK)

    async def _export(self, kind: ObjectKind) -> _Listed | None:
        rpc = self.rpc
        if rpc is None:
            return None
        try:
            folder = (await self._listing(rpc)).get(kind.value)
            if folder is None:
                return _Listed(None, {})
            # Blocks: listing the (sharded) folder too would cost the node as much as the
            # export again; a block the export lacks is read by path. Data files: the export
            # stops at the first file of several chunks (its chunks are no whole file).
            blocks = kind is ObjectKind.BLOCK
            exported = await rpc.export_raw_blocks(
                folder,
                max_bytes=EXPORT_MAX_BYTES if blocks else DATA_EXPORT_MAX_BYTES,
                stop_at_file_node=not blocks,
            )
        except IpfsError:
            return None  # no RPC API to list with (a gateway alone): keep reading by path
        return _Listed(folder, await asyncio.to_thread(_by_name, exported.values()))

    async def _listing(self, rpc: IpfsFolderReader) -> dict[str, str]:
        """The root's entries (``blocks``, ``data``, ...), listed once for every kind."""
        if self._root_listing is None:
            self._root_listing = asyncio.ensure_future(rpc.ls_names(f"/ipfs/{self.root}"))
        return await asyncio.shield(self._root_listing)

    async def aclose(self) -> None:
        """Drops what was exported and not taken."""
        pending: list[asyncio.Future[Any]] = [
            task for task in (self._ahead, self._root_listing) if task is not None
        ]
        for export in self._exports.values():
            pending.append(export)
            done = export.done() and not export.cancelled()
            listed = export.result() if done and not export.exception() else None
            if listed is not None and listed.entries is not None:
                pending.append(listed.entries)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._exports.clear()
        self._ahead = self._root_listing = None
        self.rpc = None


class IpfsObjectStore(ReadOnlyObjectStore):
    def __init__(
        self,
        gateway: IpfsGateway,
        root: CID,
        kind: ObjectKind,
        *,
        max_bytes: int = 16 << 20,
        rpc: IpfsFolderReader | None = None,
        folder: IpfsDatasetFolder | None = None,
    ) -> None:
        """``folder``: shared with the dataset's other stores (else one of its own, on
        ``rpc``; ``aclose`` then closes it)."""
        self.gateway = gateway
        self.root = root
        self.kind = kind
        self.max_bytes = max_bytes
        self._own_folder = folder is None
        self._folder = IpfsDatasetFolder(root, rpc) if folder is None else folder
        self._by_path = 0

    def __repr__(self) -> str:
        return f"IpfsObjectStore(/ipfs/{self.root}/{self.kind.value}/)"

    async def contains(self, hash: Multihash) -> bool:
        try:
            await self.gateway.get(await self._path(hash, await self._listed()), length=1)
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
        data = _take_exported(listed, hash)
        if data is not None:
            if len(data) > self.max_bytes:
                raise RemoteStoreError(f"{self!r}{hash} is larger than {self.max_bytes} bytes")
            return data
        parts: list[bytes] = []
        total = 0
        async for chunk in self._iter_chunks(hash, listed):
            total += len(chunk)
            if total > self.max_bytes:
                raise RemoteStoreError(f"{self!r}{hash} is larger than {self.max_bytes} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        listed = await self._listed()
        data = _take_exported(listed, hash)
        if data is not None:
            for at in range(0, len(data), chunk_size):
                yield data[at : at + chunk_size] if len(data) > chunk_size else data
            return
        async for chunk in self._iter_chunks(hash, listed, chunk_size):
            yield chunk

    async def _iter_chunks(
        self, hash: Multihash, listed: _Listed | None, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        """From the gateway: by CID once the folder is listed, else by path."""
        path = await self._path(hash, listed)
        try:
            async for chunk in self.gateway.iter_chunks(path, chunk_size=chunk_size):
                yield chunk
        except IpfsNotFoundError:
            raise ObjectNotFoundError(repr(self), hash) from None

    async def _path(self, hash: Multihash, listed: _Listed | None) -> str:
        """``/ipfs/<object cid>`` once the folder is listed, else the object's path below the
        dataset's CID."""
        entries = None if listed is None else await self._entries(listed)
        if entries is None:
            return f"/ipfs/{self.root}/{object_key(self.kind, hash)}"
        cid = entries.get(hash.to_multibase())
        if cid is None:
            raise ObjectNotFoundError(repr(self), hash)
        return f"/ipfs/{cid}"

    async def _entries(self, listed: _Listed) -> dict[str, str] | None:
        """The folder's listing, made once at the first name its export lacked (``None``:
        blocks, or no RPC API to list with: read by path)."""
        if listed.folder is None:
            return {}
        rpc = self._folder.rpc
        if rpc is None or self.kind is ObjectKind.BLOCK:
            return None
        if listed.entries is None:
            listed.entries = asyncio.ensure_future(_list_folder(rpc, listed.folder))
        return await asyncio.shield(listed.entries)

    async def _listed(self) -> _Listed | None:
        """The folder's export once it is under way (``read_ahead``) or more than
        ``LIST_AFTER`` objects were read by path; ``None`` until then."""
        folder = self._folder
        if not folder.exporting(self.kind):
            if folder.rpc is None:
                return None
            self._by_path += 1
            if self._by_path <= LIST_AFTER:
                return None
        return await asyncio.shield(folder.export(self.kind))

    async def aclose(self) -> None:
        """Drops what was exported and not taken (a shared folder is closed by its owner)."""
        if self._own_folder:
            await self._folder.aclose()


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


def _take_exported(listed: _Listed | None, hash: Multihash) -> bytes | None:
    """The object's bytes from its folder's export, taken once (a pull reads each object once);
    ``None``: not exported (or not yet time to export)."""
    return None if listed is None else listed.exported.pop(hash.to_multibase(), None)


async def _list_folder(rpc: IpfsFolderReader, folder: str) -> dict[str, str] | None:
    try:
        return await rpc.ls_names(folder)
    except IpfsError:
        return None  # the node stopped answering its RPC API: read by path


def _by_name(blocks: Iterable[bytes]) -> dict[str, bytes]:
    return {Multihash.from_digest_sha3_256(data).to_multibase(): data for data in blocks}
