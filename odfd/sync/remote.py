"""Where a dataset is replicated from or to: opening a remote (``odfd.sync.remote_url``) as a
read-only dataset for the Simple Transfer Protocol, or an S3 one as a writable dataset."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
from multiformats import CID

from odfd.sync.errors import RemoteNotFoundError, UnsupportedUrlError
from odfd.sync.remote_url import RemoteUrl
from protocol.errors import ParseError
from protocol.identity import DatasetId
from protocol.transfer.simple import ObjectKind
from storage.dataset import Dataset
from storage.ipfs_client import IpfsGateway, IpnsName, parse_cid
from storage.ipfs_settings import IpfsSettings
from storage.s3_settings import S3Settings
from storage.stores.http import HttpClient, HttpObjectStore, HttpRefStore
from storage.stores.http_limits import HttpLimits
from storage.stores.ipfs import IpfsObjectStore, IpfsRefStore
from storage.stores.remote import AbsentNamedStore

IPFS_API_ENV = "ODFD_IPFS_API"
IPFS_GATEWAY_ENV = "ODFD_IPFS_GATEWAY"


# --- IPFS ---------------------------------------------------------------------------------------


async def resolve_ipfs_root(remote: RemoteUrl, ipfs: IpfsSettings) -> tuple[CID, str]:
    """The CID an ``ipfs://`` / ``ipns://`` URL reads now, with the subpath below it."""
    name, subpath = remote.ipfs_root
    try:
        if remote.scheme == "ipfs":
            return parse_cid(name), subpath
        return await ipfs.client().name_resolve(IpnsName.parse(name)), subpath
    except ParseError as err:
        raise UnsupportedUrlError(f"{remote}: {err}") from None


# --- opening a remote as a read-only dataset ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """A remote dataset read by the Simple Transfer Protocol; ``label`` names it in messages."""

    dataset: Dataset
    label: str


@asynccontextmanager
async def open_source(
    remote: RemoteUrl,
    session: aiohttp.ClientSession,
    ipfs: IpfsSettings,
    headers: dict[str, str] | None = None,
    limits: HttpLimits | None = None,
    s3: S3Settings | None = None,
) -> AsyncIterator[Source]:
    if remote.scheme == "s3":
        yield Source(await open_s3_dataset(remote, s3), str(remote))
    elif remote.scheme in ("http", "https"):
        client = HttpClient(session, remote.http_base, headers, limits)
        yield Source(
            _remote_dataset(lambda kind: HttpObjectStore(client, kind), HttpRefStore(client)),
            remote.http_base,
        )
    elif remote.scheme == "file":
        root = remote.path
        if not (root / "blocks").is_dir() or not (root / "refs").is_dir():
            raise RemoteNotFoundError(f"{remote}: not a dataset folder (no blocks/ and refs/)")
        yield Source(Dataset.open_local(root), str(remote))
    else:
        cid, subpath = await resolve_ipfs_root(remote, ipfs)
        async with IpfsGateway(ipfs.gateway, session=session) as gateway:
            folder = (
                cid if not subpath else await _resolve_subpath(gateway, cid, subpath, remote, ipfs)
            )
            yield Source(
                _remote_dataset(
                    lambda kind: IpfsObjectStore(gateway, folder, kind),
                    IpfsRefStore(gateway, folder),
                ),
                f"{remote} (/ipfs/{folder})",
            )


async def open_s3_dataset(
    remote: RemoteUrl, settings: S3Settings | None, dataset_id: DatasetId | None = None
) -> Dataset:
    """The dataset folder at an S3 URL, once its bucket answers (a missing bucket or refused
    credentials are reported as such, not as a missing dataset)."""
    # obstore takes ~0.1 s to import: only commands that reach a bucket pay for it.
    from storage.s3_client import S3Bucket
    from storage.stores.s3 import s3_dataset

    bucket = S3Bucket(remote.s3, settings)
    await bucket.check_bucket()
    return s3_dataset(bucket, remote.s3, dataset_id)


async def _resolve_subpath(
    gateway: IpfsGateway, cid: CID, subpath: str, remote: RemoteUrl, ipfs: IpfsSettings
) -> CID:
    node = cid
    for segment in subpath.split("/"):
        links = {link.name: link for link in await ipfs.client().ls(node)}
        if segment not in links:
            raise RemoteNotFoundError(f"{remote}: /ipfs/{node} has no entry {segment!r}")
        node = links[segment].cid
    return node


def _remote_dataset(stores, refs) -> Dataset:
    return Dataset(
        blocks=stores(ObjectKind.BLOCK),
        data=stores(ObjectKind.DATA),
        checkpoints=stores(ObjectKind.CHECKPOINT),
        refs=refs,
        info=AbsentNamedStore(),
    )
