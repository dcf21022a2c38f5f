"""A dataset served over HTTP by the Simple Transfer Protocol, as read-only stores.

``GET {base}refs/head``, ``{base}blocks/<hash>``, ``{base}data/<hash>``,
``{base}checkpoints/<hash>`` (RFC-007). Idempotent reads are retried a few times on connection
errors and 5xx answers; redirects, time-outs and body framing follow ``http_fetch``. Bytes are
returned as received; callers verify them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp

from protocol.errors import ParseError
from protocol.identity import Multihash
from protocol.transfer.simple import MAX_REF_BYTES, ObjectKind, object_key, parse_ref, ref_key
from storage.errors import ObjectNotFoundError
from storage.stores.http_fetch import iter_body, open_get, read_body
from storage.stores.http_limits import HttpLimits
from storage.stores.localfs import MAX_SIGNATURE_BYTES, SIGNATURE_SUFFIX
from storage.stores.remote import (
    ReadOnlyObjectStore,
    ReadOnlyRefStore,
    RemoteStatusError,
    RemoteStoreError,
    RemoteUnavailableError,
)

RETRIES = 3
_RETRY_DELAY = 0.2


def dataset_base_url(url: str) -> str:
    """A dataset URL with exactly one trailing slash, so keys join below it."""
    return url.rstrip("/") + "/"


class HttpClient:
    """One ``aiohttp`` session plus the base URL of a dataset, optional request headers and the
    time-outs every request to the peer observes (``storage.stores.http_fetch``)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        headers: dict[str, str] | None = None,
        limits: HttpLimits | None = None,
    ) -> None:
        self.session = session
        self.base_url = dataset_base_url(base_url)
        self.headers = dict(headers or {})
        self.limits = limits or HttpLimits()

    @asynccontextmanager
    async def get(
        self, key: str, *, method: str = "GET"
    ) -> AsyncIterator[aiohttp.ClientResponse | None]:
        """The response to ``GET {base}{key}``, ``None`` for 404; retried on connection errors
        and 5xx answers (a stalled peer or a refused redirect is not retried)."""
        url = self.base_url + key
        for attempt in range(RETRIES):
            try:
                async with open_get(
                    self.session, url, headers=self.headers, limits=self.limits, method=method
                ) as response:
                    if response.status == 404:
                        yield None
                        return
                    if response.status >= 500 and attempt + 1 < RETRIES:
                        await asyncio.sleep(_RETRY_DELAY * 2**attempt)
                        continue
                    if response.status >= 400:
                        body = await read_body(response, 300, what=url, limits=self.limits)
                        detail = refusal_message(body.decode("utf-8", "replace"))
                        raise RemoteStatusError(
                            f"{method} {url} answered {response.status}: {detail}",
                            response.status,
                        )
                    yield response
                    return
            except aiohttp.ClientConnectionError as err:
                if attempt + 1 < RETRIES:
                    await asyncio.sleep(_RETRY_DELAY * 2**attempt)
                    continue
                raise RemoteUnavailableError(
                    f"{method} {url} failed: {err or type(err).__name__}"
                ) from None
        raise AssertionError("unreachable: the last attempt returns or raises")


class HttpObjectStore(ReadOnlyObjectStore):
    """``blocks/``, ``data/`` or ``checkpoints/`` of a dataset served over HTTP.

    ``max_bytes`` bounds ``get_bytes`` (blocks): a longer answer is an error, not a memory sink.
    """

    def __init__(self, client: HttpClient, kind: ObjectKind, *, max_bytes: int = 16 << 20) -> None:
        self.client = client
        self.kind = kind
        self.max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"HttpObjectStore({self.client.base_url}{self.kind.value}/)"

    def url_of(self, hash: Multihash) -> str:
        return self.client.base_url + object_key(self.kind, hash)

    async def contains(self, hash: Multihash) -> bool:
        async with self.client.get(object_key(self.kind, hash), method="HEAD") as response:
            return response is not None

    async def size(self, hash: Multihash) -> int:
        async with self.client.get(object_key(self.kind, hash), method="HEAD") as response:
            if response is None:
                raise ObjectNotFoundError(repr(self), hash)
            if response.content_length is None:
                raise RemoteStoreError(f"HEAD {self.url_of(hash)} gave no Content-Length")
            return response.content_length

    async def get_bytes(self, hash: Multihash) -> bytes:
        async with self.client.get(object_key(self.kind, hash)) as response:
            if response is None:
                raise ObjectNotFoundError(repr(self), hash)
            url = self.url_of(hash)
            data = await read_body(
                response, self.max_bytes + 1, what=url, limits=self.client.limits
            )
            if len(data) > self.max_bytes:
                raise RemoteStoreError(f"{self.url_of(hash)} is larger than {self.max_bytes} bytes")
            return data

    async def iter_chunks(self, hash: Multihash, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        async with self.client.get(object_key(self.kind, hash)) as response:
            if response is None:
                raise ObjectNotFoundError(repr(self), hash)
            async for chunk in iter_body(
                response,
                1 << 62,
                what=self.url_of(hash),
                limits=self.client.limits,
                chunk_size=chunk_size,
            ):
                yield chunk


class HttpRefStore(ReadOnlyRefStore):
    def __init__(self, client: HttpClient) -> None:
        self.client = client

    def __repr__(self) -> str:
        return f"HttpRefStore({self.client.base_url}refs/)"

    async def get(self, name: str) -> Multihash | None:
        key = ref_key(name)
        async with self.client.get(key) as response:
            if response is None:
                return None
            body = await read_body(
                response,
                MAX_REF_BYTES + 1,
                what=self.client.base_url + key,
                limits=self.client.limits,
            )
        try:
            return parse_ref(body, self.client.base_url + key)
        except ParseError as err:
            raise RemoteStoreError(str(err)) from None

    async def get_signature(self, name: str) -> bytes | None:
        """A 4xx refusal counts as "none": servers that predate signed heads (the reference's)
        may answer 400 for the unknown ref name; a signed dataset treats "none" as strictly as
        a bad signature, so a peer gains nothing by refusing. 5xx stays an error (transient)."""
        key = f"{ref_key(name)}{SIGNATURE_SUFFIX}"
        try:
            async with self.client.get(key) as response:
                if response is None:
                    return None
                return await read_body(
                    response,
                    MAX_SIGNATURE_BYTES + 1,
                    what=self.client.base_url + key,
                    limits=self.client.limits,
                )
        except RemoteStatusError as err:
            if 400 <= err.status < 500:
                return None
            raise


def refusal_message(body: str) -> str:
    """A node's words in an error answer: its ``{"message": ...}`` (odfd's and the reference's
    JSON errors), else the text itself (an older odfd node's plain-text errors)."""
    try:
        document = json.loads(body)
    except ValueError:
        return body.strip()
    message = document.get("message") if isinstance(document, dict) else None
    return message if isinstance(message, str) else body.strip()
