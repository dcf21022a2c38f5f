"""Manifests ``odfd add`` is given as http(s) URLs, fetched with a size limit and a timeout, so a
wrong link (a large file, a server that never answers) fails with one line naming the URL
instead of filling memory or hanging."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odfd.errors import ManifestError

if TYPE_CHECKING:
    import aiohttp


async def fetch_manifests(urls: list[str], limit: int, seconds: float) -> dict[str, bytes]:
    """Each URL's body (fetched once however often named), at most ``limit`` bytes within
    ``seconds``; a ``ManifestError`` naming the URL and what went wrong otherwise."""
    import aiohttp

    fetched: dict[str, bytes] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session:
        for url in dict.fromkeys(urls):
            fetched[url] = await _fetch(session, url, limit, seconds)
    return fetched


async def _fetch(session: aiohttp.ClientSession, url: str, limit: int, seconds: float) -> bytes:
    import aiohttp

    try:
        async with session.get(url) as response:
            if response.status != 200:
                raise ManifestError(f"cannot fetch {url}: HTTP {response.status} {response.reason}")
            if response.content_length is not None and response.content_length > limit:
                raise _too_large(url, limit)
            body = bytearray()
            async for chunk in response.content.iter_chunked(1 << 16):
                body.extend(chunk)
                if len(body) > limit:
                    raise _too_large(url, limit)
            return bytes(body)
    except aiohttp.ClientConnectorError as error:
        from odfd.sync.transport.http_errors import cannot_reach

        origin = f"{error.host}:{error.port}"  # where the connection failed
        raise ManifestError(
            f"cannot fetch {url}: {cannot_reach(origin, error, node=False)}"
        ) from None
    except aiohttp.ClientError as error:
        raise ManifestError(f"cannot fetch {url}: {error}") from None
    except TimeoutError:
        raise ManifestError(f"cannot fetch {url}: no answer within {seconds:g} s") from None


def _too_large(url: str, limit: int) -> ManifestError:
    return ManifestError(
        f"cannot fetch {url}: larger than {limit // 1024} KiB, too large for a manifest"
    )
