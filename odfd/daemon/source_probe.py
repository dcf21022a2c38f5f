"""The cheap "has the source's head changed?" check a mirror makes before pulling.

HTTP, ``file://``, S3 and ``ipfs://`` sources: read ``refs/head`` (one small request). ``ipns://``
sources: resolve the name first; the same CID as last time means the same content, so nothing is
read from the gateway at all. When the head is new, its block is fetched (one more request),
checked against its hash and decoded for its sequence number (``storage.chain.reader``), which
gives the mirror's lag in blocks without walking the chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from odfd.sync import smart_client as smart
from odfd.sync.errors import CorruptSourceError, RemoteNotFoundError
from odfd.sync.ipfs_settings import IpfsSettings
from odfd.sync.remote import open_source
from odfd.sync.remote_url import RemoteUrl, parse_remote_url
from protocol.identity import Multihash
from storage.chain.reader import ChainBlock, HashMismatch, MalformedBlock, check_block
from storage.ipfs_client import IpnsName
from storage.s3_settings import S3Settings
from storage.stores.http_limits import HttpLimits


@dataclass(frozen=True, slots=True)
class SourceHead:
    head: Multihash
    sequence_number: int | None
    cid: str | None = None
    """What an ``ipns://`` source resolved to."""


async def probe_source(
    remote: RemoteUrl,
    session: aiohttp.ClientSession,
    ipfs: IpfsSettings,
    *,
    token: str | None,
    known: SourceHead | None,
    limits: HttpLimits | None = None,
    s3: S3Settings | None = None,
) -> SourceHead:
    """The source's head now (``known`` is what the previous check saw)."""
    read_from, cid = remote, None
    if remote.scheme == "ipns":
        name, subpath = remote.ipfs_root
        cid = str(await ipfs.client().name_resolve(IpnsName.parse(name)))
        if known is not None and known.cid == cid:
            return known
        read_from = parse_remote_url(f"ipfs://{cid}" + (f"/{subpath}" if subpath else ""))
    headers = smart.auth_headers(token) if token else None
    async with open_source(read_from, session, ipfs, headers, limits, s3) as source:
        head = await source.dataset.refs.get("head")
        if head is None:
            raise RemoteNotFoundError(f"{remote}: no dataset there (refs/head is missing)")
        if known is not None and known.head == head and known.sequence_number is not None:
            return SourceHead(head, known.sequence_number, cid)
        data = await source.dataset.blocks.get_bytes(head)
    checked = check_block(head, data)
    if isinstance(checked, HashMismatch):
        raise CorruptSourceError(f"{remote}: head block {head} does not hash to its name")
    if isinstance(checked, MalformedBlock):
        raise CorruptSourceError(f"{remote}: head block {head} does not decode: {checked.reason}")
    assert isinstance(checked, ChainBlock)  # one block alone has no link to break
    return SourceHead(head, checked.block.sequence_number, cid)
