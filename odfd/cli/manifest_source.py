"""Where ``odfd add`` reads manifests from: files, folders of them, http(s) URLs, standard input.

A URL is fetched by ``odfd.app.manifest_urls`` with the size limit and timeout set here, so a
wrong link (a large file, a server that never answers) fails with one line instead of filling
memory or hanging.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from odfd.app.manifest_urls import fetch_manifests
from odfd.errors import ManifestError

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
        asyncio.run(fetch_manifests(urls, MAX_MANIFEST_BYTES, FETCH_TIMEOUT_SECONDS))
        if urls
        else {}
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
