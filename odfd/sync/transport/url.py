"""Remote URLs: what ``odfd pull`` / ``push`` / ``search`` and the daemon's mirrors accept, each
parsed into the transport that reaches it, without importing any client (the CLI parses URLs
before it knows whether it will talk to a peer).

``http(s)://`` (Smart Transfer Protocol when the server offers it, else Simple), ``odf+http(s)://``
(Smart only, the reference's spelling), ``file://`` (a dataset folder), ``ipfs://CID[/path]`` and
``ipns://NAME[/path]`` (a dataset published to IPFS), ``s3://bucket/prefix`` and
``s3+http(s)://host[:port]/bucket/prefix`` (a dataset folder in an S3 bucket, read and written),
and a bare ``did:odf:…`` (the dataset its owner published under its DID's IPNS name).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from odfd.sync.did_names import is_did, parse_did
from odfd.sync.errors import UnsupportedUrlError
from odfd.sync.transport.base import Transport
from odfd.sync.transport.did import DidTransport
from odfd.sync.transport.file import FileTransport
from odfd.sync.transport.ipfs import IpfsTransport
from odfd.sync.transport.ipns import IpnsTransport
from odfd.sync.transport.s3 import S3Transport
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.simple_http import SimpleHttpTransport
from odfd.sync.transport.smart_http import SmartHttpTransport
from protocol.errors import ParseError
from storage.s3_settings import is_s3_url, parse_s3_url
from storage.stores.http_limits import HttpLimits

_DEFAULTS = TransportSettings()
_SMART_ONLY = "odf+"


def parse_remote(
    text: str,
    settings: TransportSettings = _DEFAULTS,
    *,
    token: str | None = None,
    limits: HttpLimits | None = None,
    protocol: str = "auto",
) -> Transport:
    """The transport for the remote at ``text``, with ``settings`` (``token`` authorises HTTP
    requests, else the settings' token for the URL, from ``[sync.tokens]`` or ``odfd login``;
    ``limits`` replaces the settings' time-outs; ``protocol`` says how an HTTP remote
    is read: ``auto``, the Smart Transfer Protocol when offered, ``smart`` or ``simple``).
    ``UnsupportedUrlError`` names what is wrong with the URL."""
    if is_did(text):
        return DidTransport(parse_did(text.rstrip("/")), settings.ipfs)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    smart_only = scheme.startswith(_SMART_ONLY)
    scheme = scheme.removeprefix(_SMART_ONLY)
    if scheme in ("http", "https"):
        if not parts.netloc:
            raise UnsupportedUrlError(f"{text}: an HTTP URL needs a host")
        url = text.rstrip("/")
        http_base = (url[len(_SMART_ONLY) :] if smart_only else url) + "/"
        limits = limits or settings.limits
        if token is None:
            token = settings.token_for(http_base)
        if protocol == "simple":
            return SimpleHttpTransport(url, http_base, token, limits)
        required = smart_only or protocol == "smart"
        return SmartHttpTransport(url, http_base, token, limits, required)
    if smart_only:
        raise UnsupportedUrlError(f"{text}: odf+ only goes with http:// or https://")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise UnsupportedUrlError(f"{text}: file:// URLs must name a local path")
        return FileTransport(Path(unquote(parts.path)).resolve())
    if scheme == "ipfs":
        return IpfsTransport(text.rstrip("/"), parts.netloc, parts.path.strip("/"), settings.ipfs)
    if scheme == "ipns":
        return IpnsTransport(text.rstrip("/"), parts.netloc, parts.path.strip("/"), settings.ipfs)
    if is_s3_url(text):
        try:
            location = parse_s3_url(text)
        except ParseError as err:
            raise UnsupportedUrlError(str(err)) from None
        return S3Transport(location, settings.s3)
    raise UnsupportedUrlError(
        f"{text}: unsupported URL; use http(s)://, odf+http(s)://, file://, ipfs://, ipns://, "
        "s3:// or s3+http(s)://"
    )


def node_url(text: str) -> str:
    """The HTTP node serving the remote at ``text``, as a token is kept for it:
    ``http(s)://host[:port]/path/`` with scheme and host in lower case, ``odf+`` dropped and one
    trailing slash, so one node's URL is never a prefix of another host's or port's URL."""
    transport = parse_remote(text)
    if not isinstance(transport, SmartHttpTransport | SimpleHttpTransport):
        raise UnsupportedUrlError(f"{text}: logins are to http:// or https:// nodes")
    parts = urlsplit(transport.http_base)
    if parts.query or parts.fragment or parts.username or parts.password or not parts.hostname:
        raise UnsupportedUrlError(f"{text}: a node's URL has a host and no query or credentials")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host}{port}{parts.path.rstrip('/')}/"


def canonical_url(text: str) -> str:
    """How the remote at ``text`` is recorded (``UnsupportedUrlError`` if it is none)."""
    return parse_remote(text).url


def peer_key(text: str) -> str:
    """Whom reaching the remote at ``text`` loads (``""`` for a URL no transport takes: the
    attempt reports it)."""
    try:
        return parse_remote(text).peer_key()
    except UnsupportedUrlError:
        return ""
