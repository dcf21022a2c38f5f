"""Where a dataset is replicated from or to: parsing remote URLs and opening them as read-only
datasets for the Simple Transfer Protocol.

Schemes: ``http(s)://`` (Smart Transfer Protocol when the server offers it, else Simple),
``odf+http(s)://`` (Smart only, the reference's spelling), ``file://`` (a dataset folder),
``ipfs://CID[/path]`` and ``ipns://NAME[/path]`` (a dataset published to IPFS), ``s3://bucket/prefix``
and ``s3+http(s)://host:port/bucket/prefix`` (a dataset folder in an S3 bucket, read and written).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

import aiohttp
from multiformats import CID

from odfd.sync.errors import RemoteNotFoundError, UnsupportedUrlError
from protocol.errors import ParseError
from protocol.identity import DatasetId, DatasetName
from protocol.transfer.simple import ObjectKind
from storage.dataset import Dataset
from storage.ipfs_client import IpfsClient, IpfsGateway, IpnsName, parse_cid
from storage.s3_client import S3Bucket, S3Location, S3Settings, is_s3_url, parse_s3_url
from storage.stores.http import HttpClient, HttpObjectStore, HttpRefStore, dataset_base_url
from storage.stores.http_fetch import HttpLimits
from storage.stores.ipfs import IpfsObjectStore, IpfsRefStore
from storage.stores.remote import AbsentNamedStore

Scheme = Literal["http", "https", "file", "ipfs", "ipns", "s3"]

DEFAULT_IPFS_API = "/ip4/127.0.0.1/tcp/5001/http"
DEFAULT_IPFS_GATEWAY = "http://127.0.0.1:8080"
IPFS_API_ENV = "ODFD_IPFS_API"
IPFS_GATEWAY_ENV = "ODFD_IPFS_GATEWAY"


@dataclass(frozen=True, slots=True)
class RemoteUrl:
    """A parsed remote. ``text`` is how it is recorded in the catalog and ``info/config``."""

    scheme: Scheme
    text: str
    smart_only: bool = False

    @property
    def http_base(self) -> str:
        """``http(s)://…/`` for HTTP remotes (``odf+`` dropped), with one trailing slash."""
        return dataset_base_url(self.text.removeprefix("odf+"))

    @property
    def path(self) -> Path:
        return Path(unquote(urlsplit(self.text).path))

    @property
    def ipfs_root(self) -> tuple[str, str]:
        """``(name, subpath)`` of an ``ipfs://`` / ``ipns://`` URL."""
        parts = urlsplit(self.text)
        return parts.netloc, parts.path.strip("/")

    @property
    def s3(self) -> S3Location:
        """Bucket and key prefix of an ``s3://`` / ``s3+http(s)://`` URL."""
        return parse_s3_url(self.text)

    def default_name(self) -> DatasetName | None:
        """The last path segment, if it is a valid dataset name (as the reference names a
        dataset pulled from a URL)."""
        segment = urlsplit(self.text).path.rstrip("/").rsplit("/", 1)[-1]
        try:
            return DatasetName.parse(unquote(segment)) if segment else None
        except ParseError:
            return None

    def __str__(self) -> str:
        return self.text


def parse_remote_url(text: str) -> RemoteUrl:
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    smart_only = scheme.startswith("odf+")
    scheme = scheme.removeprefix("odf+")
    if scheme in ("http", "https"):
        if not parts.netloc:
            raise UnsupportedUrlError(f"{text}: an HTTP URL needs a host")
        return RemoteUrl(scheme, text.rstrip("/"), smart_only)  # type: ignore[arg-type]  # scheme is one of the Scheme literals, checked above
    if smart_only:
        raise UnsupportedUrlError(f"{text}: odf+ only goes with http:// or https://")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise UnsupportedUrlError(f"{text}: file:// URLs must name a local path")
        return RemoteUrl("file", f"file://{Path(unquote(parts.path)).resolve()}")
    if scheme in ("ipfs", "ipns"):
        return RemoteUrl(scheme, text.rstrip("/"))  # type: ignore[arg-type]  # scheme is one of the Scheme literals, checked above
    if is_s3_url(text):
        try:
            location = parse_s3_url(text)
        except ParseError as err:
            raise UnsupportedUrlError(str(err)) from None
        return RemoteUrl("s3", location.url.rstrip("/"))
    raise UnsupportedUrlError(
        f"{text}: unsupported URL; use http(s)://, odf+http(s)://, file://, ipfs://, ipns://, "
        "s3:// or s3+http(s)://"
    )


def looks_like_url(text: str) -> bool:
    return "://" in text


# --- IPFS ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IpfsSettings:
    """The node odfd uses: ``$ODFD_IPFS_API`` / ``$ODFD_IPFS_GATEWAY``, else ``[ipfs]`` ``api`` /
    ``gateway`` in ``config.toml``, else Kubo's defaults on loopback (``odfd.config`` reads them)."""

    api: str = DEFAULT_IPFS_API
    gateway: str = DEFAULT_IPFS_GATEWAY

    def client(self) -> IpfsClient:
        return IpfsClient(self.api)


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
    bucket = S3Bucket(remote.s3, settings)
    await bucket.check_bucket()
    return Dataset.open_s3(bucket, remote.s3, dataset_id)


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
