"""Remote URLs: what ``odfd pull`` / ``push`` and the daemon's mirrors accept, parsed without
importing any client (the CLI parses URLs before it knows whether it will talk to a peer).

Schemes: ``http(s)://`` (Smart Transfer Protocol when the server offers it, else Simple),
``odf+http(s)://`` (Smart only, the reference's spelling), ``file://`` (a dataset folder),
``ipfs://CID[/path]`` and ``ipns://NAME[/path]`` (a dataset published to IPFS), ``s3://bucket/prefix``
and ``s3+http(s)://host[:port]/bucket/prefix`` (a dataset folder in an S3 bucket, read and written).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from odfd.sync.errors import UnsupportedUrlError
from protocol.errors import ParseError
from protocol.identity import DatasetName
from storage.s3_settings import S3Location, is_s3_url, parse_s3_url

Scheme = Literal["http", "https", "file", "ipfs", "ipns", "s3"]


@dataclass(frozen=True, slots=True)
class RemoteUrl:
    """A parsed remote. ``text`` is how it is recorded in the catalog and ``info/config``."""

    scheme: Scheme
    text: str
    smart_only: bool = False

    @property
    def http_base(self) -> str:
        """``http(s)://…/`` for HTTP remotes (``odf+`` dropped), with one trailing slash."""
        return self.text.removeprefix("odf+").rstrip("/") + "/"

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
