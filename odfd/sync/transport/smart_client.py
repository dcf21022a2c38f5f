"""The client side of the Smart Transfer Protocol's WebSocket: connecting, and each message
exchange of the pull and push flows, in the order the reference's client performs them.

A failed request comes back either as an ``{"Err": …}`` answer or, as the reference's server
does it, as a close frame with code 1011 whose reason is that JSON; both raise
``RemoteTransferError`` carrying the parsed error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import aiohttp

from odfd.sync.errors import (
    AccessDeniedError,
    CorruptSourceError,
    RemoteNotFoundError,
    SyncError,
    TransferFlowError,
)
from odfd.sync.transport.smart_metadata import metadata_response, read_metadata_text
from protocol.identity import Multihash
from protocol.transfer.smart import messages as m

MAX_MESSAGE_BYTES = 1 << 30
"""Largest WebSocket message accepted (the metadata tarball travels as one JSON message)."""
RECEIVE_TIMEOUT = 300.0

T = TypeVar("T")


class SmartUnavailableError(SyncError):
    """The server does not speak the Smart Transfer Protocol at this URL (plain file server,
    older node): the caller may fall back to the Simple Transfer Protocol."""


class RemoteTransferError(SyncError):
    """The server answered a request with an error."""

    def __init__(self, where: str, error: m.TransferError) -> None:
        super().__init__(f"{where}: {error.describe()}")
        self.error = error


def websocket_url(http_base: str, operation: Literal["pull", "push"]) -> str:
    return http_base + operation


def auth_headers(token: str | None) -> dict[str, str]:
    headers = {m.VERSION_HEADER: str(m.PROTOCOL_VERSION)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class SmartChannel:
    """One WebSocket session: typed send and receive, at most one receive in flight."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        where: str,
        receive_timeout: float = RECEIVE_TIMEOUT,
    ) -> None:
        self.ws = ws
        self.where = where
        self.receive_timeout = receive_timeout
        self._pending: asyncio.Future[aiohttp.WSMessage] | None = None

    async def send(self, message: Any) -> None:
        try:
            await self.ws.send_str(m.encode(message))
        except (aiohttp.ClientError, ConnectionError) as err:
            raise TransferFlowError(
                f"{self.where}: sending {type(message).__name__} failed: {err}"
            ) from None

    def receive_soon(self) -> asyncio.Future[aiohttp.WSMessage]:
        """The next frame, as a future that can be waited on beside other work."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self.ws.receive(timeout=self.receive_timeout))
        return self._pending

    async def receive(
        self,
        parse: Callable[[Any], T],
        what: str,
        decode: Callable[[str, str], Any] = m.decode_json,
    ) -> T:
        """The next text frame, read by ``decode`` (the JSON value) and then ``parse``."""
        future = self.receive_soon()
        try:
            frame = await future
        except TimeoutError:
            raise TransferFlowError(
                f"{self.where}: the peer stalled: no {what} within {self.receive_timeout:g} s "
                "(first_byte_timeout)"
            ) from None
        finally:
            self._pending = None
        if frame.type == aiohttp.WSMsgType.TEXT:
            value = decode(frame.data, f"{self.where}: {what}")
            try:
                return parse(value)
            except m.MessageError as err:
                raise TransferFlowError(f"{self.where}: malformed {what}: {err}") from None
        if frame.type in (
            aiohttp.WSMsgType.CLOSE,
            aiohttp.WSMsgType.CLOSING,
            aiohttp.WSMsgType.CLOSED,
        ):
            error = m.decode_error(frame.extra or "") if isinstance(frame.extra, str) else None
            if error is not None:
                raise RemoteTransferError(self.where, error)
            raise TransferFlowError(
                f"{self.where}: the server closed the connection while we awaited {what}"
                + (f" ({frame.extra})" if frame.extra else "")
            )
        if frame.type == aiohttp.WSMsgType.ERROR:
            raise TransferFlowError(
                f"{self.where}: connection failed while awaiting {what}: {frame.data}"
            )
        raise TransferFlowError(
            f"{self.where}: expected a text frame with {what}, got {frame.type.name}"
        )

    async def receive_result(self, parse: Callable[[Any], T], what: str) -> T:
        """A ``Result`` message: its ``error`` (if any) is raised as ``RemoteTransferError``."""
        message = await self.receive(parse, what)
        error = getattr(message, "error", None)
        if error is not None:
            raise RemoteTransferError(self.where, error)
        return message

    async def close(self) -> None:
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
        await self.ws.close()


@asynccontextmanager
async def connect(
    session: aiohttp.ClientSession,
    http_base: str,
    operation: Literal["pull", "push"],
    token: str | None,
    receive_timeout: float = RECEIVE_TIMEOUT,
) -> AsyncIterator[SmartChannel]:
    url = websocket_url(http_base, operation)
    try:
        async with asyncio.timeout(receive_timeout):
            ws = await session.ws_connect(
                url,
                headers=auth_headers(token),
                protocols=(m.WEBSOCKET_PROTOCOL,),
                max_msg_size=MAX_MESSAGE_BYTES,
                autoping=True,
                heartbeat=None,
            )
    except aiohttp.WSServerHandshakeError as err:
        if err.status in (401, 403):
            raise AccessDeniedError(
                f"{url}: the server refused to {operation} ({err.status}): "
                + ("give a valid token (--token)" if operation == "push" else "access denied")
            ) from None
        if err.status == 404 and operation == "pull":
            raise SmartUnavailableError(
                f"{url}: no Smart Transfer Protocol endpoint (404)"
            ) from None
        if err.status == 404:
            raise RemoteNotFoundError(f"{url}: no such dataset or endpoint (404)") from None
        raise SmartUnavailableError(
            f"{url}: WebSocket upgrade refused ({err.status} {err.message})"
        ) from None
    except (aiohttp.ClientConnectionError, TimeoutError) as err:
        raise SyncError(f"{url}: cannot connect: {err or type(err).__name__}") from None
    channel = SmartChannel(ws, url, receive_timeout)
    try:
        yield channel
    finally:
        await channel.close()


# --- pull ---------------------------------------------------------------------------------------


async def pull_plan(
    channel: SmartChannel,
    begin_after: Multihash | None,
    force: bool,
    stop_at: Multihash | None = None,
) -> m.TransferPlan:
    await channel.send(
        m.DatasetPullRequest(
            begin_after=begin_after, stop_at=stop_at, force_update_if_diverged=force
        )
    )
    response = await channel.receive_result(m.DatasetPullResponse.from_json, "DatasetPullResponse")
    assert response.transfer_plan is not None  # an Ok response carries the plan
    return response.transfer_plan


async def pull_metadata(channel: SmartChannel) -> m.MetadataBlocksBatch:
    await channel.send(m.DatasetPullMetadataRequest())
    # The whole metadata tarball travels as one message: a long chain may take minutes.
    patience = channel.receive_timeout
    channel.receive_timeout = max(patience, RECEIVE_TIMEOUT)
    try:
        response = await channel.receive(
            metadata_response, "DatasetMetadataPullResponse", decode=read_metadata_text
        )
    finally:
        channel.receive_timeout = patience
    return response.blocks


async def pull_object_urls(
    channel: SmartChannel, files: tuple[m.ObjectFileReference, ...]
) -> dict[tuple[m.ObjectType, Multihash], m.TransferUrl]:
    """Download URLs for ``files``, keyed by (object type, hash); every file must be answered."""
    await channel.send(m.DatasetPullObjectsTransferRequest(files))
    response = await channel.receive(
        m.DatasetPullObjectsTransferResponse.from_json, "DatasetPullObjectsTransferResponse"
    )
    urls = {
        (s.object_file.object_type, s.object_file.physical_hash): s.download_from
        for s in response.object_transfer_strategies
    }
    for file in files:
        if (file.object_type, file.physical_hash) not in urls:
            raise TransferFlowError(
                f"{channel.where}: no download URL for {file.object_type} {file.physical_hash}"
            )
        url = urls[(file.object_type, file.physical_hash)].url
        if urlsplit(url).scheme.lower() not in ("http", "https"):
            raise CorruptSourceError(
                f"peer {channel.where} points {file.object_type} {file.physical_hash} at a "
                f"non-HTTP URL ({url}); refused"
            )
    return urls


# --- push ---------------------------------------------------------------------------------------


async def push_begin(
    channel: SmartChannel,
    current_head: Multihash | None,
    plan: m.TransferPlan,
    force: bool,
    batch: m.MetadataBlocksBatch,
) -> None:
    await channel.send(m.DatasetPushRequest(current_head, plan, force))
    await channel.receive_result(
        lambda v: m.Accepted.from_json(v, "DatasetPushResponse"), "DatasetPushResponse"
    )
    await channel.send(m.DatasetPushMetadataRequest(batch))
    await channel.receive_result(
        lambda v: m.Accepted.from_json(v, "DatasetPushMetadataResponse"),
        "DatasetPushMetadataResponse",
    )


async def push_object_urls(
    channel: SmartChannel, files: tuple[m.ObjectFileReference, ...]
) -> tuple[m.PushObjectTransferStrategy, ...]:
    await channel.send(m.DatasetPushObjectsTransferRequest(files, is_truncated=False))
    response = await channel.receive_result(
        m.DatasetPushObjectsTransferResponse.from_json, "DatasetPushObjectsTransferResponse"
    )
    return response.object_transfer_strategies


async def push_uploads(
    channel: SmartChannel, uploads: asyncio.Task[None], done: Callable[[], int]
) -> None:
    """Answer the server's progress requests until ``uploads`` finishes, then report completion."""
    while True:
        frame = channel.receive_soon()
        waiting: set[asyncio.Future[Any]] = {uploads, frame}
        finished, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if uploads in finished:
            await uploads
            break
        await channel.receive(
            m.DatasetPushObjectsUploadProgressRequest.from_json,
            "DatasetPushObjectsUploadProgressRequest",
        )
        await channel.send(m.DatasetPushObjectsUploadProgressResponse(done()))
    await channel.send(m.DatasetPushObjectsUploadProgressResponse())


async def push_complete(channel: SmartChannel) -> None:
    await channel.send(m.DatasetPushComplete())
    await channel.receive(m.DatasetPushCompleteConfirmed.from_json, "DatasetPushCompleteConfirmed")
