"""The server side of a Smart Transfer Protocol WebSocket: the upgrade (protocol version check),
typed messages, and errors sent the way the reference sends them.

An error answer to a request whose response is a ``Result`` goes out as an ``{"Err": …}``
text message; an error anywhere else goes out as a close frame with code 1011 whose reason is
that JSON (a close reason holds at most 123 bytes, so long messages are shortened).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import WSMsgType, web

from odfd.sync.errors import TransferFlowError
from protocol.transfer.smart import messages as m

MAX_MESSAGE_BYTES = 1 << 30
RECEIVE_TIMEOUT = 300.0
CLOSE_WAIT = 5.0
_CLOSE_REASON_BYTES = 123
_INT32 = re.compile(r"[+-]?[0-9]+")
"""What the reference's header parses (Rust's ``i32::from_str``; its range is checked apart)."""

T = TypeVar("T")


def require_version_header(request: web.Request) -> int:
    """The client's protocol version. A request without the header, or with one that is not an
    integer, is refused first, in the words of the reference's typed header extractor (it runs
    before the handler's own checks)."""
    value = request.headers.get(m.VERSION_HEADER)
    needs = f"the Smart Transfer Protocol needs `{m.VERSION_HEADER}: {m.PROTOCOL_VERSION}`"
    if value is None:
        raise web.HTTPBadRequest(text=f"Header of type `{m.VERSION_HEADER}` was missing: {needs}")
    if _INT32.fullmatch(value) is None or not -(2**31) <= int(value) < 2**31:
        raise web.HTTPBadRequest(
            text=f"invalid HTTP header ({m.VERSION_HEADER}): {value!r} is not an integer; {needs}"
        )
    return int(value)


def check_version(request: web.Request) -> None:
    """Refuse a client that sent no protocol version header or another version than ours."""
    if require_version_header(request) != m.PROTOCOL_VERSION:
        raise web.HTTPBadRequest(  # the reference's words first
            text="Incompatible client version: the client speaks "
            f"{request.headers[m.VERSION_HEADER]!r}, this server Smart Transfer Protocol "
            f"version {m.PROTOCOL_VERSION}"
        )


async def accept(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(
        protocols=(m.WEBSOCKET_PROTOCOL,),
        max_msg_size=MAX_MESSAGE_BYTES,
        heartbeat=None,
        autoping=True,
    )
    await ws.prepare(request)
    return ws


class ServerChannel:
    def __init__(self, ws: web.WebSocketResponse, where: str) -> None:
        self.ws = ws
        self.where = where

    async def send(self, message: Any) -> None:
        await self.send_text(m.encode(message))

    async def send_text(self, text: str) -> None:
        """A message already encoded (``m.encode``)."""
        await self.ws.send_str(text)

    async def receive(self, parse: Callable[[Any], T], what: str) -> T | None:
        """The next message, or ``None`` if the client closed the session."""
        frame = await self.ws.receive(timeout=RECEIVE_TIMEOUT)
        if frame.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
            return None
        if frame.type != WSMsgType.TEXT:
            raise TransferFlowError(
                f"{self.where}: expected {what} as a text frame, got {frame.type.name}"
            )
        value = m.decode_json(frame.data, f"{self.where}: {what}")
        try:
            return parse(value)
        except m.MessageError as err:
            raise TransferFlowError(f"{self.where}: malformed {what}: {err}") from None

    async def close_with_error(self, error: m.TransferError) -> None:
        await self.ws.close(code=m.CLOSE_CODE_ERROR, message=close_reason(error))

    async def finish(self) -> None:
        """Wait (briefly) for the client to close, as the reference does, then close."""
        if not self.ws.closed:
            try:
                while True:
                    frame = await asyncio.wait_for(self.ws.receive(), CLOSE_WAIT)
                    if frame.type in (
                        WSMsgType.CLOSE,
                        WSMsgType.CLOSING,
                        WSMsgType.CLOSED,
                        WSMsgType.ERROR,
                    ):
                        break
            except TimeoutError:
                pass
        await self.ws.close()


def close_reason(error: m.TransferError) -> bytes:
    """The error's JSON, shortened to fit a close frame (an ``Internal`` error with a clipped
    message if need be)."""
    text = json.dumps(error.to_json(), separators=(",", ":")).encode()
    if len(text) <= _CLOSE_REASON_BYTES:
        return text
    phase = error.phase or m.TransferPhase("Push", "CompleteRequest")
    message = error.describe() if error.kind != "Internal" else error.message
    while True:
        short = m.TransferError("Internal", phase, message)
        text = json.dumps(short.to_json(), separators=(",", ":")).encode()
        if len(text) <= _CLOSE_REASON_BYTES or not message:
            return text
        message = message[: max(len(message) - max(len(text) - _CLOSE_REASON_BYTES, 1) - 1, 0)]
