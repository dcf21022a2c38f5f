"""How odfd reads anything from a peer over HTTP: one redirect policy, one set of time-outs, and
whole bodies read within size bounds whatever their framing.

* Redirects are followed by hand, at most ``MAX_REDIRECTS`` hops, and only to ``http://`` or
  ``https://`` (never from ``https`` down to ``http``); a ``file://`` or other target, or a loop,
  is refused with one line. The ``Authorization`` header is not sent to another origin.
* Time-outs (``HttpLimits``): connecting, the first byte of an answer (and any later silence as
  long), and a minimum transfer rate measured over a window, so a peer that dribbles a byte at a
  time is given up on as surely as one that says nothing. A stall is not retried: the message
  names what stalled.
* Bodies are read to their end (chunked transfer encoding may deliver them in many pieces with
  pauses between), never beyond ``limit`` bytes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import aiohttp
from yarl import URL

from storage.stores.http_limits import HttpLimits
from storage.stores.remote import RemoteStoreError, RemoteUnavailableError

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 1 << 20


class RedirectRefusedError(RemoteStoreError):
    """A peer redirected to a URL odfd does not follow (another scheme, a downgrade, a loop)."""


class StalledError(RemoteUnavailableError):
    """A peer stopped answering, or answers slower than the minimum rate."""


def origin(url: URL) -> str:
    return str(url.origin()) if url.absolute and url.host else str(url)


def _check_http(url: URL, where: str) -> None:
    if url.scheme not in ("http", "https"):
        raise RedirectRefusedError(f"peer {where}: {url} is not an HTTP URL; refused")


@asynccontextmanager
async def open_get(
    session: aiohttp.ClientSession,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    limits: HttpLimits | None = None,
    method: str = "GET",
) -> AsyncIterator[aiohttp.ClientResponse]:
    """The response to ``method url``, after following the redirects the policy allows.

    Raises ``RemoteUnavailableError`` when nothing answers, ``StalledError`` when the peer
    stops answering within the limits, ``RedirectRefusedError`` for a refused redirect.
    """
    limits = limits or HttpLimits()
    current = URL(url)
    first = origin(current)
    _check_http(current, first)
    sent = dict(headers or {})
    for hop in range(MAX_REDIRECTS + 1):
        try:
            response = await session.request(
                method,
                current,
                headers=sent,
                allow_redirects=False,
                timeout=limits.client_timeout(),
            )
        except aiohttp.ConnectionTimeoutError:
            raise RemoteUnavailableError(
                f"{method} {current}: cannot connect within {limits.connect:g} s (connect_timeout)"
            ) from None
        except TimeoutError:
            raise StalledError(
                f"{method} {current}: the peer stalled: no answer within "
                f"{limits.first_byte:g} s (first_byte_timeout)"
            ) from None
        if response.status not in _REDIRECTS:
            try:
                yield response
            finally:
                response.release()
            return
        location = response.headers.get("Location")
        response.release()
        if location is None:
            raise RemoteStoreError(
                f"{method} {current} answered {response.status} without Location"
            )
        try:
            target = current.join(URL(location))
        except ValueError:
            raise RedirectRefusedError(
                f"peer {first} redirected {current} to an invalid URL {location!r}; refused"
            ) from None
        if target.scheme not in ("http", "https"):
            raise RedirectRefusedError(
                f"peer {first} redirected to a non-HTTP URL ({location}); refused"
            )
        if current.scheme == "https" and target.scheme == "http":
            raise RedirectRefusedError(
                f"peer {first} redirected from https to http ({location}); refused"
            )
        if origin(target) != origin(current):
            sent.pop("Authorization", None)
        if response.status == 303:
            method = "GET" if method != "HEAD" else method
        current = target
        if hop == MAX_REDIRECTS:
            break
    raise RedirectRefusedError(
        f"peer {first} redirected {url} more than {MAX_REDIRECTS} times (a redirect loop?); refused"
    )


class _RateWatch:
    """Tells how long the next read may wait, and whether the transfer stalled."""

    def __init__(self, limits: HttpLimits, what: str) -> None:
        self.limits = limits
        self.what = what
        now = time.monotonic()
        self.last_byte = now
        self.window_start = now
        self.window_bytes = 0

    def wait_limit(self) -> float:
        now = time.monotonic()
        wait = self.last_byte + self.limits.first_byte - now
        if self.limits.min_rate > 0:
            wait = min(wait, self.window_start + self.limits.rate_window - now)
        return max(wait, 0.0)

    def add(self, count: int) -> None:
        self.last_byte = time.monotonic()
        self.window_bytes += count

    def check(self) -> None:
        """Raise ``StalledError`` if the peer fell silent or below the rate; start a new
        window when the current one is over."""
        now = time.monotonic()
        if now - self.last_byte >= self.limits.first_byte:
            raise StalledError(
                f"{self.what}: the peer stalled: no data for {self.limits.first_byte:g} s "
                "(first_byte_timeout)"
            )
        if self.limits.min_rate > 0 and now - self.window_start >= self.limits.rate_window:
            rate = self.window_bytes / (now - self.window_start)
            if rate < self.limits.min_rate:
                raise StalledError(
                    f"{self.what}: the peer stalled: {rate:.1f} bytes/s over "
                    f"{self.limits.rate_window:g} s, below min_rate {self.limits.min_rate} bytes/s"
                )
            self.window_start, self.window_bytes = now, 0


async def iter_body(
    response: aiohttp.ClientResponse,
    limit: int,
    *,
    what: str,
    limits: HttpLimits | None = None,
    chunk_size: int = _CHUNK,
) -> AsyncIterator[bytes]:
    """The body's chunks up to its end, or until ``limit`` bytes were read (callers that must
    detect an oversized body pass their bound plus one)."""
    watch = _RateWatch(limits or HttpLimits(), what)
    remaining = limit
    while remaining > 0 and not response.content.at_eof():
        try:
            async with asyncio.timeout(watch.wait_limit()):
                chunk = await response.content.read(min(chunk_size, remaining))
        except TimeoutError:
            watch.check()
            continue
        except aiohttp.ClientError as err:
            raise RemoteUnavailableError(
                f"{what}: the answer broke off: {err or type(err).__name__}"
            ) from None
        if not chunk:
            return
        watch.add(len(chunk))
        remaining -= len(chunk)
        yield chunk
        watch.check()


async def read_body(
    response: aiohttp.ClientResponse,
    limit: int,
    *,
    what: str,
    limits: HttpLimits | None = None,
) -> bytes:
    """The whole body, at most ``limit`` bytes (pass the bound plus one to detect more)."""
    parts = [chunk async for chunk in iter_body(response, limit, what=what, limits=limits)]
    return b"".join(parts)
