"""odfd's client of an IPFS node: Kubo's RPC API (`/api/v0`) and the node's HTTP gateway.

Works against Kubo and js-ipfs alike, whose answers differ in form: CIDs are compared parsed
(a node may print CIDv1 in base32 or base58btc), sizes are read whether numbers or strings, IPNS
names are accepted as peer ids (`12D3Koo…`) or as `k51…` CIDs, and a missing path counts as not
found whether it comes back as 404 or 500. `ipfshttpclient` blocks, so every RPC call runs in an
executor; `ipfshttpclient.connect()` is avoided because it refuses js-ipfs's version number.
It is I/O, so it lives in the storage layer (the IPFS store reads through its gateway); it sets no
warning filters: the `odfd` program does (`odfd.cli.main.quiet_dependency_warnings`).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import ipfshttpclient
import ipfshttpclient.exceptions as rpc_errors
from ipfshttpclient import filescanner, multipart
from multiformats import CID

from protocol.errors import ParseError
from storage.errors import StorageError
from storage.ipfs_car import CarFormatError, raw_blocks
from storage.ipns_name import IpnsName as IpnsName  # re-exported: callers import it from here

T = TypeVar("T")

# Kubo and js-ipfs answer every RPC error with HTTP 500; only the message tells what went wrong.
_NOT_FOUND_PHRASES = (
    "not found",
    "does not exist",
    "doesn't exist",
    "no link named",
    "could not resolve",
    "not pinned",
    "no such",
    "no key named",
    "no key by the given name",
    "no peers found",  # a routing query with nobody to ask (js-ipfs)
)
_TIMEOUT_PHRASES = ("timed out", "deadline exceeded")
_UNIXFS_DIRECTORY_TYPES = (1, 5)  # UnixFS Directory and HAMTShard
_QUERY_VALUE = 5  # a routing query event carrying the value found


class IpfsError(StorageError):
    """The IPFS node refused a request or answered something odfd cannot use."""


class IpfsUnavailableError(IpfsError):
    """No IPFS node answers at the configured address."""


class IpfsNotFoundError(IpfsError, LookupError):
    """The CID, path, IPNS name, key or pin does not exist on the node."""


class IpfsTimeoutError(IpfsError, TimeoutError):
    """The node did not produce the content in time (for example, no peer has the block)."""


def parse_cid(text: str) -> CID:
    """A CID from a node's answer, CIDv1 re-encoded in base32 (Kubo's form) so `str()` is stable."""
    try:
        cid = CID.decode(text.strip())
    except (ValueError, KeyError) as err:
        raise ParseError(f"{text!r} is not a CID: {err}") from err
    return cid if cid.version == 0 else cid.set(base="base32")


@dataclass(frozen=True, slots=True)
class IpfsKey:
    """A key in the node's keystore, usable to publish IPNS records."""

    name: str
    id: IpnsName


@dataclass(frozen=True, slots=True)
class IpfsLink:
    """One entry of a UnixFS directory listing."""

    name: str
    cid: CID
    size: int
    is_directory: bool


@dataclass(frozen=True, slots=True)
class IpfsNodeInfo:
    peer_id: str
    agent_version: str
    addresses: tuple[str, ...]


class IpfsClient:
    """Async client of one node's RPC API, at a multiaddr (`/ip4/127.0.0.1/tcp/5001/http`) or URL.

    `timeout` bounds each RPC round trip; `fetch_timeout` bounds calls that may have to fetch
    blocks from other peers (cat, ls, pin add, name resolve) and is also sent to the node, which
    would otherwise wait for a missing block forever. Each call opens its own HTTP connection, so
    concurrent calls (several executor threads) share no state.
    """

    def __init__(
        self,
        api: str,
        *,
        timeout: float = 120.0,
        fetch_timeout: float = 60.0,
        executor: Executor | None = None,
    ) -> None:
        self.api = api
        self._timeout = timeout
        self._fetch_timeout = fetch_timeout
        self._executor = executor
        try:
            self._rpc = ipfshttpclient.Client(addr=api_multiaddr(api), timeout=timeout)
        except rpc_errors.AddressError as err:
            raise ParseError(f"{api!r} is not an IPFS API address: {err}") from err

    async def id(self) -> IpfsNodeInfo:
        answer = await self._call("id", self._rpc.id)
        return IpfsNodeInfo(
            peer_id=str(answer["ID"]),
            agent_version=str(answer.get("AgentVersion", "")),
            addresses=tuple(str(a) for a in answer.get("Addresses") or ()),
        )

    async def add_directory(
        self,
        path: Path,
        *,
        exclude: Iterable[str] = (),
        include_hidden: bool = False,
        only_hash: bool = False,
        pin: bool = True,
    ) -> CID:
        """Adds a folder tree as UnixFS (CIDv1, raw leaves) and returns the folder's CID.

        `exclude` names paths relative to the folder (`info`, `sub/file`) left out with what lies
        below them. Dot-files are left out unless `include_hidden`, as `ipfs add -r` does, so a
        folder gets the CID the reference gets from the `ipfs` command line.
        """
        if not await asyncio.to_thread(path.is_dir):
            raise IpfsError(f"cannot add {path} to IPFS: not a directory")
        entries = await self._call(
            f"add {path}",
            self._rpc.add,
            str(path),
            recursive=True,
            pattern=_ExcludePaths(exclude, include_hidden=include_hidden),
            cid_version=1,
            raw_leaves=True,
            only_hash=only_hash,
            pin=pin,
        )
        root_name = _folder_name(path)
        for entry in entries:
            if entry["Name"] == root_name:
                return parse_cid(entry["Hash"])
        raise IpfsError(f"the IPFS node's answer to adding {path} lists no entry for {root_name!r}")

    async def add_bytes(self, data: bytes, *, only_hash: bool = False, pin: bool = True) -> CID:
        """Adds one file (CIDv1, raw leaves) and returns its CID."""
        cid = await self._call(
            f"add ({len(data)} bytes)",
            self._rpc.add_bytes,
            data,
            opts={"cid-version": 1, "raw-leaves": True, "only-hash": only_hash, "pin": pin},
        )
        return parse_cid(cid)

    async def cat(self, path: CID | str, *, offset: int = 0, length: int | None = None) -> bytes:
        """The bytes of the file at `path` (`<cid>` or `<cid>/sub/path`), optionally a range."""
        opts: dict[str, Any] = {"timeout": f"{self._fetch_timeout}s"}
        if offset:
            opts["offset"] = offset
        if length is not None:
            opts["length"] = length
        return await self._fetch_call(f"cat {path}", self._rpc.cat, str(path), opts=opts)

    async def ls(self, path: CID | str) -> list[IpfsLink]:
        answer = await self._fetch_call(
            f"ls {path}", self._rpc.ls, str(path), opts={"timeout": f"{self._fetch_timeout}s"}
        )
        return [
            IpfsLink(
                name=str(link["Name"]),
                cid=parse_cid(link["Hash"]),
                size=int(link.get("Size") or 0),
                is_directory=int(link.get("Type", 0)) in _UNIXFS_DIRECTORY_TYPES,
            )
            for obj in answer["Objects"]
            for link in obj.get("Links") or ()
        ]

    async def ls_names(self, path: CID | str) -> dict[str, str]:
        """Name -> CID (as text, CIDv1 in base32) of a folder's entries, in one call that skips
        asking for each entry's type and size (which costs the node a block read per entry).
        The CIDs stay text: parsing thousands with ``multiformats`` costs more than the call."""
        answer = await self._fetch_call(
            f"ls {path}",
            self._rpc.ls,
            str(path),
            opts={
                "timeout": f"{self._fetch_timeout}s",
                "resolve-type": "false",
                "size": "false",
                "cid-base": "base32",
            },
        )
        return {
            str(link["Name"]): str(link["Hash"])
            for obj in answer["Objects"]
            for link in obj.get("Links") or ()
        }

    async def export_raw_blocks(
        self, cid: CID | str, *, max_bytes: int, stop_at_file_node: bool = False
    ) -> dict[bytes, bytes]:
        """CID bytes -> bytes of the raw blocks of the DAG below ``cid`` (``dag/export``: one
        stream), up to about ``max_bytes`` of them (the rest left out, not an error), and with
        ``stop_at_file_node`` up to the first file node (``storage.ipfs_car.raw_blocks``)."""

        def export() -> dict[bytes, bytes]:
            chunks = self._rpc._client.request(
                "/dag/export", (str(cid),), stream=True, timeout=self._fetch_timeout + 10.0
            )
            try:
                return dict(raw_blocks(chunks, max_bytes, stop_at_file_node=stop_at_file_node))
            except CarFormatError as err:
                raise IpfsError(f"dag export {cid} on the IPFS node at {self.api}: {err}") from None
            finally:
                chunks.close()

        return await self._call(f"dag export {cid}", export)

    async def key_gen(self, name: str) -> IpfsKey:
        """Creates an ed25519 key (Kubo's default; js-ipfs would make RSA without being told)."""
        answer = await self._call(f"key gen {name}", self._rpc.key.gen, name, type="ed25519")
        return IpfsKey(str(answer["Name"]), IpnsName.parse(answer["Id"]))

    async def key_list(self) -> list[IpfsKey]:
        """The node's keys, each once (js-ipfs lists every key twice)."""
        answer = await self._call("key list", self._rpc.key.list)
        keys: dict[str, IpfsKey] = {}
        for entry in answer["Keys"] or ():
            keys.setdefault(entry["Name"], IpfsKey(str(entry["Name"]), IpnsName.parse(entry["Id"])))
        return list(keys.values())

    async def key_rm(self, name: str) -> None:
        await self._call(f"key rm {name}", self._rpc.key.rm, name)

    async def name_publish(
        self,
        cid: CID,
        *,
        key: str = "self",
        lifetime: str = "24h",
        allow_offline: bool = True,
    ) -> IpnsName:
        """Points the IPNS name of `key` at `/ipfs/<cid>`; returns the name."""
        answer = await self._call(
            f"name publish /ipfs/{cid} with key {key}",
            self._rpc.name.publish,
            f"/ipfs/{cid}",
            key=key,
            lifetime=lifetime,
            allow_offline=allow_offline,
            resolve=False,
        )
        return IpnsName.parse(answer["Name"])

    async def name_resolve(self, name: IpnsName | str) -> CID:
        """The CID an IPNS name points at; `IpfsNotFoundError` if no record is found."""
        ipns = name if isinstance(name, IpnsName) else IpnsName.parse(name)
        answer = await self._fetch_call(
            f"name resolve /ipns/{ipns}",
            self._rpc.name.resolve,
            f"/ipns/{ipns.peer_id}",
            opts={"timeout": f"{self._fetch_timeout}s"},
        )
        path = str(answer["Path"])
        parts = path.strip("/").split("/")
        if len(parts) != 2 or parts[0] != "ipfs":
            raise IpfsError(f"IPNS name {ipns} points at {path}, not at a root /ipfs/<cid>")
        return parse_cid(parts[1])

    async def key_import(self, name: str, key: bytes, password: str, encrypted: str) -> IpfsKey:
        """Imports a private key as ``name``: Kubo takes the cleartext libp2p protobuf ``key``
        as a file, js-ipfs only ``encrypted`` (its AES-GCM form of ``key``) with ``password``."""
        try:
            body, headers = multipart.stream_bytes(key)
            answer = await self._call(
                f"key import {name}",
                self._rpc._client.request,
                "/key/import",
                (name,),
                opts={"format": "libp2p-protobuf-cleartext"},
                data=body,
                headers=headers,
                decoder="json",
            )
        except IpfsError:
            answer = await self._call(
                f"key import {name}",
                self._rpc._client.request,
                "/key/import",
                (name,),
                opts={"pem": encrypted, "password": password},
                decoder="json",
            )
        entry = answer[0] if isinstance(answer, list) else answer
        return IpfsKey(str(entry["Name"]), IpnsName.parse(entry["Id"]))

    async def record_get(self, name: IpnsName) -> bytes:
        """The IPNS record stored for ``name`` in the node's routing (local or its peers), as
        the signed bytes, for odfd to verify: Kubo's ``routing/get``, else ``dht/get``."""
        events = await self._routing_call(
            f"get the IPNS record of {name}",
            "get",
            (f"/ipns/{name.peer_id}",),
            opts={"timeout": f"{self._fetch_timeout}s"},
            timeout=self._fetch_timeout + 10.0,
        )
        for event in events:
            if event.get("Type") == _QUERY_VALUE and event.get("Extra"):
                return base64.b64decode(event["Extra"])
        raise IpfsNotFoundError(f"no IPNS record for {name} found by the IPFS node at {self.api}")

    async def record_put(self, name: IpnsName, record: bytes) -> None:
        """Stores a signed record for ``name`` in the node's routing and sends it to its peers
        (anyone may: the record carries the owner's signature, no key is needed)."""
        await self._routing_call(
            f"put the IPNS record of {name}",
            "put",
            (f"/ipns/{name.peer_id}",),
            payload=record,
            timeout=self._fetch_timeout + 10.0,
        )

    async def provide(self, cid: CID) -> None:
        """Announces to the node's peers that it holds ``cid``."""
        await self._routing_call(
            f"provide {cid}", "provide", (str(cid),), timeout=self._fetch_timeout + 10.0
        )

    async def _routing_call(
        self,
        what: str,
        verb: str,
        args: tuple[str, ...],
        payload: bytes | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """``routing/<verb>`` (Kubo >= 0.14), else the older ``dht/<verb>`` (js-ipfs), with
        ``payload`` as the file argument; the node's query events, one dict each."""
        answer: Any = None
        for prefix in ("/routing/", "/dht/"):
            if payload is not None:  # a fresh stream per attempt
                kwargs["data"], kwargs["headers"] = multipart.stream_bytes(payload)
            try:
                answer = await self._call(
                    what, self._rpc._client.request, prefix + verb, args, decoder="json", **kwargs
                )
                break
            except IpfsError as err:
                if prefix == "/dht/" or not _is_missing_endpoint(str(err)):
                    raise
        return answer if isinstance(answer, list) else [answer] if answer else []

    async def pin_add(self, cid: CID, *, recursive: bool = True) -> None:
        await self._fetch_call(
            f"pin add {cid}",
            self._rpc.pin.add,
            str(cid),
            recursive=recursive,
            opts={"timeout": f"{self._fetch_timeout}s"},
        )

    async def pin_ls(self, *, pin_type: str = "recursive") -> dict[CID, str]:
        """Pinned CIDs and their pin type (`recursive`, `direct`, `indirect`)."""
        answer = await self._call("pin ls", self._rpc.pin.ls, type=pin_type)
        return {parse_cid(cid): str(info["Type"]) for cid, info in (answer["Keys"] or {}).items()}

    async def pin_rm(self, cid: CID, *, recursive: bool = True) -> None:
        await self._call(f"pin rm {cid}", self._rpc.pin.rm, str(cid), recursive=recursive)

    async def swarm_connect(self, multiaddr: str) -> None:
        # `Client.swarm.connect` of ipfshttpclient 0.7.0 sends every character of the address as
        # a separate argument, so the request is made one level down, with the same error mapping.
        await self._call(
            f"swarm connect {multiaddr}",
            self._rpc._client.request,
            "/swarm/connect",
            (multiaddr,),
            decoder="json",
        )

    async def _fetch_call(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await self._call(what, fn, *args, timeout=self._fetch_timeout + 10.0, **kwargs)

    async def _call(self, what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))
        except rpc_errors.ConnectionError as err:
            raise IpfsUnavailableError(
                f"no IPFS node reachable at {self.api} ({what}): {err.original or err}"
            ) from err
        except rpc_errors.TimeoutError as err:
            raise IpfsTimeoutError(
                f"{what}: the IPFS node at {self.api} did not answer in time"
            ) from err
        except rpc_errors.ErrorResponse as err:
            raise _classify(str(err))(
                f"{what} failed on the IPFS node at {self.api}: {err}"
            ) from err
        except rpc_errors.Error as err:
            raise IpfsError(f"{what} failed on the IPFS node at {self.api}: {err}") from err


class IpfsGateway:
    """Reads files through a node's HTTP gateway, as odfd reads datasets published to IPFS.

    Use as `async with IpfsGateway(url) as gw:` or pass an `aiohttp.ClientSession` to share.
    """

    def __init__(
        self,
        base_url: str,
        *,
        session: aiohttp.ClientSession | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = session
        self._owns_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)

    async def __aenter__(self) -> IpfsGateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def get_ipfs(
        self, cid: CID | str, subpath: str = "", *, offset: int = 0, length: int | None = None
    ) -> bytes:
        return await self.get(
            _content_path("ipfs", str(cid), subpath), offset=offset, length=length
        )

    async def get_ipns(
        self, name: IpnsName | str, subpath: str = "", *, offset: int = 0, length: int | None = None
    ) -> bytes:
        ipns = name if isinstance(name, IpnsName) else IpnsName.parse(name)
        path = _content_path("ipns", ipns.peer_id, subpath)
        return await self.get(path, offset=offset, length=length)

    async def get(self, path: str, *, offset: int = 0, length: int | None = None) -> bytes:
        """The bytes at `/ipfs/<cid>/…` or `/ipns/<name>/…`, or `length` of them from `offset`."""
        if length == 0:
            return b""
        chunks = [chunk async for chunk in self.iter_chunks(path, offset=offset, length=length)]
        return b"".join(chunks)

    async def iter_chunks(
        self,
        path: str,
        *,
        offset: int = 0,
        length: int | None = None,
        chunk_size: int = 1 << 20,
    ) -> AsyncIterator[bytes]:
        """Streams a file without holding it in memory."""
        headers = {}
        if offset or length is not None:
            end = "" if length is None else str(offset + length - 1)
            headers["Range"] = f"bytes={offset}-{end}"
        url = self.base_url + path
        session = self._session_or_new()
        try:
            async with session.get(url, headers=headers, timeout=self._timeout) as response:
                if response.status == 416:
                    return
                if response.status in (404, 500):
                    # Kubo >= 0.19 answers 500 for some missing paths, js-ipfs for all of them.
                    detail = (await response.text(errors="replace"))[:300].strip()
                    raise IpfsNotFoundError(
                        f"{url}: not found on the IPFS gateway ({response.status}: {detail})"
                    )
                if response.status >= 400:
                    detail = (await response.text(errors="replace"))[:300].strip()
                    raise IpfsError(f"{url}: the IPFS gateway answered {response.status}: {detail}")
                # A gateway that ignores Range answers 200 with the whole file: skip to the range.
                skip = offset if (headers and response.status == 200) else 0
                remaining = length
                async for chunk in response.content.iter_chunked(chunk_size):
                    if skip:
                        dropped = min(skip, len(chunk))
                        chunk, skip = chunk[dropped:], skip - dropped
                    if remaining is not None:
                        chunk, remaining = chunk[:remaining], remaining - min(remaining, len(chunk))
                    if chunk:
                        yield chunk
                    if remaining == 0:
                        return
        except aiohttp.ClientConnectorError as err:
            raise IpfsUnavailableError(
                f"no IPFS gateway reachable at {self.base_url}: {err}"
            ) from err
        except TimeoutError as err:
            raise IpfsTimeoutError(f"{url}: the IPFS gateway did not answer in time") from err
        except aiohttp.ClientError as err:
            raise IpfsError(f"{url}: reading from the IPFS gateway failed: {err}") from err

    def _session_or_new(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session


def api_multiaddr(api: str) -> str:
    """The multiaddr `ipfshttpclient` needs, from a multiaddr or an `http(s)://host:port` URL."""
    if api.startswith("/"):
        return api
    url = urllib.parse.urlsplit(api)
    if url.scheme not in ("http", "https") or not url.hostname or url.path not in ("", "/"):
        raise ParseError(
            f"{api!r} is not an IPFS API address (expected a multiaddr or http://host:port)"
        )
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        protocol = "ip4" if ipaddress.ip_address(url.hostname).version == 4 else "ip6"
    except ValueError:
        protocol = "dns"
    return f"/{protocol}/{url.hostname}/tcp/{port}/{url.scheme}"


def _folder_name(path: Path) -> str:
    """The name the node gives the added folder: the last part of the normalised path."""
    return os.path.basename(os.path.normpath(path))


def _content_path(namespace: str, root: str, subpath: str) -> str:
    quoted = urllib.parse.quote(subpath.strip("/"))
    return f"/{namespace}/{root}" + (f"/{quoted}" if quoted else "")


def _is_missing_endpoint(message: str) -> bool:
    """A node without the endpoint: js-ipfs answers a bare "Not Found" for ``routing/*`` (a
    missing record says more), an older Kubo "unknown command" or a 404."""
    return message.endswith(": Not Found") or "unknown command" in message or " 404 " in message


def _classify(message: str) -> type[IpfsError]:
    lowered = message.lower()
    if any(phrase in lowered for phrase in _TIMEOUT_PHRASES):
        return IpfsTimeoutError
    if any(phrase in lowered for phrase in _NOT_FOUND_PHRASES):
        return IpfsNotFoundError
    return IpfsError


class _ExcludePaths(filescanner.Matcher[str]):
    """Selects every path of an added folder but the excluded ones and (unless asked) dot-files."""

    __slots__ = ("_excluded", "_include_hidden")

    def __init__(self, excluded: Iterable[str], *, include_hidden: bool) -> None:
        super().__init__(is_binary=False)
        self._excluded = frozenset(p.strip("/") for p in excluded)
        self._include_hidden = include_hidden

    def _selected(self, path: str) -> bool:
        parts = path.split(os.sep)
        if not self._include_hidden and any(part.startswith(".") for part in parts):
            return False
        return not any("/".join(parts[: i + 1]) in self._excluded for i in range(len(parts)))

    def should_descend(self, path: str) -> bool:
        return self._selected(path)

    def should_report(self, path: str, *, is_dir: bool) -> bool:
        return self._selected(path)
