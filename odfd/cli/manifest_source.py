"""Where ``odfd add`` reads manifests from: files, folders of them, http(s) URLs, standard input.

A URL is fetched with a size limit and a timeout, so a wrong link (a large file, a server that
never answers) fails with one line instead of filling memory or hanging.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.errors import ManifestError

if TYPE_CHECKING:
    import aiohttp

MAX_MANIFEST_BYTES = 1 << 20
FETCH_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Manifest:
    """The bytes of one manifest source and the name errors call it by."""

    source: str
    text: bytes


def is_url(text: str) -> bool:
    return text.lower().startswith(("http://", "https://"))


def read_manifests(items: list[str], *, stdin: bool) -> list[Manifest]:
    """Every source in ``items`` (files, folders, URLs) then, with ``stdin``, standard input."""
    manifests: list[Manifest] = []
    urls = [item for item in items if is_url(item)]
    fetched = (
        asyncio.run(_fetch_all(urls, MAX_MANIFEST_BYTES, FETCH_TIMEOUT_SECONDS)) if urls else {}
    )
    for item in items:
        if is_url(item):
            manifests.append(Manifest(item, fetched[item]))
            continue
        for path in _manifest_files(Path(item)):
            try:
                manifests.append(Manifest(str(path), path.read_bytes()))
            except OSError as error:
                raise ManifestError(f"cannot read {path}: {error.strerror or error}") from None
    if stdin:
        manifests.append(Manifest("<stdin>", sys.stdin.buffer.read()))
    return manifests


async def _fetch_all(urls: list[str], limit: int, seconds: float) -> dict[str, bytes]:
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


def _manifest_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    found = [p for p in sorted(path.rglob("*.yaml")) if _is_snapshot(p)]
    if not found:
        raise ManifestError(f"{path}: no *.yaml file in it holds a DatasetSnapshot")
    return found


def _is_snapshot(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return False
    return "DatasetSnapshot" in head
