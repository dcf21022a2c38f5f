"""S3 buckets: the reference's URL forms, credentials the way the S3 ecosystem finds them, and one
client per bucket (``obstore``, bindings to the Rust ``object_store`` crate the reference uses)
whose failures become odfd's typed errors.

URL forms (as kamu-cli parses them, path-style addressing for an explicit endpoint):
``s3://bucket/prefix`` (AWS, region from the settings), ``s3+http://host[:port]/bucket/prefix``
and ``s3+https://host[:port]/bucket/prefix`` (any S3-compatible server).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from protocol.errors import ParseError
from storage.stores.remote import RemoteStoreError, RemoteUnavailableError

if TYPE_CHECKING:
    from obstore import PutMode

DEFAULT_REGION = "us-east-1"
_SCHEMES = ("s3", "s3+http", "s3+https")


class S3Error(RemoteStoreError):
    """An S3 request failed in a way that is neither a missing object nor a lost race."""


class S3AccessDeniedError(S3Error):
    """The server refused the credentials (wrong key or secret, or no permission)."""


class S3BucketNotFoundError(S3Error):
    """The bucket does not exist on the server."""


class S3ConflictError(S3Error):
    """A conditional write lost: the key exists (create) or changed (update)."""


# --- URLs ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class S3Location:
    """A bucket and a key prefix (``""`` or ending in ``/``) on an endpoint (``None``: AWS)."""

    bucket: str
    prefix: str
    endpoint: str | None = None

    @property
    def url(self) -> str:
        """The canonical URL, with a trailing slash (as the reference prints it)."""
        base = f"s3+{self.endpoint}/{self.bucket}" if self.endpoint else f"s3://{self.bucket}"
        return f"{base}/{self.prefix}"

    def child(self, name: str) -> S3Location:
        """The location of folder ``name`` below this one."""
        return replace(self, prefix=f"{self.prefix}{name.strip('/')}/")

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def __str__(self) -> str:
        return self.url


def is_s3_url(text: str) -> bool:
    return urlsplit(text).scheme.lower() in _SCHEMES


def parse_s3_url(text: str) -> S3Location:
    """``s3://bucket/prefix``, ``s3+http(s)://host[:port]/bucket/prefix``; ``ParseError`` else."""
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ParseError(f"{text}: not an S3 URL (s3://, s3+http://, s3+https://)")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ParseError(
            f"{text}: S3 URLs take no query, fragment or credentials (configure them instead)"
        )
    if not parts.netloc:
        raise ParseError(f"{text}: an S3 URL needs a {'bucket' if scheme == 's3' else 'host'}")
    if scheme == "s3":
        bucket, path, endpoint = parts.netloc, parts.path, None
    else:
        bucket, _, path = parts.path.lstrip("/").partition("/")
        endpoint = f"{scheme.removeprefix('s3+')}://{parts.netloc}"
        if not bucket:
            raise ParseError(f"{text}: no bucket after the host (s3+http://host:port/bucket/...)")
    _check_bucket(bucket, text)
    segments = [s for s in path.split("/") if s]
    if any(s in (".", "..") for s in segments):
        raise ParseError(f"{text}: '.' and '..' are not allowed in an S3 prefix")
    prefix = "".join(f"{s}/" for s in segments)
    return S3Location(bucket, prefix, endpoint)


def _check_bucket(bucket: str, text: str) -> None:
    ok = 3 <= len(bucket) <= 63 and all(c.islower() or c.isdigit() or c in ".-" for c in bucket)
    if not ok or not bucket[0].isalnum() or not bucket[-1].isalnum():
        raise ParseError(
            f"{text}: {bucket!r} is not a bucket name (3-63 lower-case letters, digits, '.', '-')"
        )


# --- credentials -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class S3Credentials:
    """Per-remote settings from ``config.toml``; empty fields fall back to the environment."""

    access_key_id: str = ""
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    region: str = ""
    profile: str = ""


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How odfd reaches S3: ``[s3]`` defaults and per-remote credentials (``remotes``, keyed by
    URL prefix, longest match wins), then ``AWS_*`` variables, then the shared credentials
    file's profile; without any, requests go unsigned (public buckets)."""

    region: str = ""
    profile: str = ""
    remotes: Mapping[str, S3Credentials] = field(default_factory=dict)
    retries: int = 3
    """Attempts per request after the first (connection failures and 5xx answers)."""
    retry_timeout: float = 20.0
    connect_timeout: float = 10.0

    def credentials_for(self, url: str) -> S3Credentials:
        best = max((p for p in self.remotes if url.startswith(p)), key=len, default=None)
        return self.remotes[best] if best is not None else S3Credentials()

    def resolve(self, location: S3Location, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The ``obstore`` configuration for ``location`` (secrets included: never print it)."""
        env = os.environ if env is None else env
        own = self.credentials_for(location.url)
        profile_name = own.profile or self.profile or env.get("AWS_PROFILE") or "default"
        profile = _profile(profile_name, env)
        config: dict[str, Any] = {}
        if own.access_key_id:
            config["access_key_id"] = own.access_key_id
            config["secret_access_key"] = own.secret_access_key
            if own.session_token:
                config["session_token"] = own.session_token
        elif env.get("AWS_ACCESS_KEY_ID") and not own.profile:
            config["access_key_id"] = env["AWS_ACCESS_KEY_ID"]
            config["secret_access_key"] = env.get("AWS_SECRET_ACCESS_KEY", "")
            if env.get("AWS_SESSION_TOKEN"):
                config["session_token"] = env["AWS_SESSION_TOKEN"]
        elif profile.get("aws_access_key_id"):
            config["access_key_id"] = profile["aws_access_key_id"]
            config["secret_access_key"] = profile.get("aws_secret_access_key", "")
            if profile.get("aws_session_token"):
                config["session_token"] = profile["aws_session_token"]
        else:
            config["skip_signature"] = True
        config["region"] = (
            own.region
            or env.get("AWS_REGION")
            or env.get("AWS_DEFAULT_REGION")
            or profile.get("region")
            or self.region
            or DEFAULT_REGION
        )
        if location.endpoint is not None:
            config["endpoint"] = location.endpoint
            config["virtual_hosted_style_request"] = False
        # If-None-Match / If-Match on PUT: how refs/head moves by compare-and-swap.
        config["conditional_put"] = "etag"
        return config


def _profile(name: str, env: Mapping[str, str]) -> dict[str, str]:
    """``name``'s keys from the shared credentials and config files (credentials win)."""
    home = Path(env.get("HOME", "~")).expanduser()
    found: dict[str, str] = {}
    files = (
        (Path(env.get("AWS_CONFIG_FILE", home / ".aws" / "config")), f"profile {name}"),
        (Path(env.get("AWS_SHARED_CREDENTIALS_FILE", home / ".aws" / "credentials")), name),
    )
    for path, section in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error as err:
            raise S3Error(f"{path}: not a valid AWS profile file: {err}") from None
        for candidate in (section, name):
            if parser.has_section(candidate):
                found.update(parser[candidate])
                break
    return found


# --- the client ------------------------------------------------------------------------------------


class S3Bucket:
    """One bucket's client; every call turns ``obstore`` errors into odfd's (messages name the
    URL, never a credential)."""

    def __init__(self, location: S3Location, settings: S3Settings | None = None) -> None:
        settings = settings or S3Settings()
        self.location = location
        self.where = f"{location.endpoint or 's3:/'}/{location.bucket}"
        self.store = S3Store(
            location.bucket,
            config=settings.resolve(location),  # type: ignore[arg-type]  # keys of S3Config
            client_options={
                "allow_http": location.endpoint is not None
                and location.endpoint.startswith("http:"),
                "connect_timeout": timedelta(seconds=settings.connect_timeout),
            },
            retry_config={
                "max_retries": settings.retries,
                "retry_timeout": timedelta(seconds=settings.retry_timeout),
            },
        )

    def __repr__(self) -> str:
        return f"S3Bucket({self.location.url!r})"

    def error(self, err: BaseException, key: str) -> Exception:
        """The odfd error for ``err`` raised by a request on ``key``."""
        text = str(err).split("\n", 1)[0]
        where = f"{self.where}/{key}"
        if isinstance(err, (PermissionDeniedError, UnauthenticatedError)) or " 403 " in text:
            return S3AccessDeniedError(
                f"{where}: access denied by the S3 server (check the access key and secret for "
                "this remote: [s3.remotes] in config.toml, AWS_* variables or the AWS profile)"
            )
        if "NoSuchBucket" in str(err):
            return S3BucketNotFoundError(f"{self.where}: no such bucket")
        if isinstance(err, (AlreadyExistsError, PreconditionError)):
            return S3ConflictError(f"{where}: another write won")
        if _is_connection_error(err):
            return RemoteUnavailableError(f"{where}: the S3 server cannot be reached: {text}")
        return S3Error(f"{where}: {text}")

    async def check_bucket(self) -> None:
        """``S3BucketNotFoundError`` / ``S3AccessDeniedError`` unless the bucket can be listed."""
        try:
            await obstore.list_with_delimiter_async(self.store, self.location.prefix or None)
        except BaseError as err:
            raise self.error(err, self.location.prefix) from None

    async def head(self, key: str) -> tuple[int, str | None] | None:
        """``(size, etag)`` of ``key``, ``None`` when absent."""
        try:
            meta = await obstore.head_async(self.store, key)
        except (NotFoundError, FileNotFoundError):
            return None
        except BaseError as err:
            raise self.error(err, key) from None
        return meta["size"], meta["e_tag"]

    async def get(self, key: str) -> tuple[bytes, str | None] | None:
        """Content and etag of ``key``, ``None`` when absent."""
        try:
            result = await obstore.get_async(self.store, key)
            data = bytes(await result.bytes_async())
        except (NotFoundError, FileNotFoundError):
            return None
        except BaseError as err:
            raise self.error(err, key) from None
        return data, result.meta["e_tag"]

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        try:
            return bytes(await obstore.get_range_async(self.store, key, start=start, length=length))
        except BaseError as err:
            raise self.error(err, key) from None

    async def stream(self, key: str, chunk_size: int) -> AsyncIterator[bytes] | None:
        """The body of ``key`` in chunks, ``None`` when absent."""
        try:
            result = await obstore.get_async(self.store, key)
        except (NotFoundError, FileNotFoundError):
            return None
        except BaseError as err:
            raise self.error(err, key) from None
        return self._chunks(result.stream(min_chunk_size=chunk_size), key, chunk_size)

    async def _chunks(self, stream: Any, key: str, chunk_size: int) -> AsyncIterator[bytes]:
        """Chunks of at most ``chunk_size`` bytes (the stream's may be larger)."""
        try:
            async for chunk in stream:
                data = bytes(chunk)
                for start in range(0, len(data), chunk_size):
                    yield data[start : start + chunk_size]
        except BaseError as err:
            raise self.error(err, key) from None

    async def put(self, key: str, body: Any, *, mode: PutMode | None = None) -> str | None:
        """Store ``body`` (bytes, a local ``Path`` or an async iterable of chunks; large ones
        go up as multipart uploads, which stay invisible unless completed) under ``key``;
        returns the new etag. ``S3ConflictError`` if ``mode``'s precondition fails."""
        try:
            result = await obstore.put_async(
                self.store, key, body, mode=mode, chunk_size=_PART_SIZE, max_concurrency=8
            )
        except BaseError as err:
            raise self.error(err, key) from None
        return result["e_tag"]

    async def copy(self, source: str, dest: str) -> None:
        try:
            await obstore.copy_async(self.store, source, dest)
        except BaseError as err:
            raise self.error(err, dest) from None

    async def delete(self, key: str) -> None:
        try:
            await obstore.delete_async(self.store, key)
        except (NotFoundError, FileNotFoundError):
            return
        except BaseError as err:
            raise self.error(err, key) from None

    async def list_keys(self, prefix: str) -> AsyncIterator[str]:
        """Every key below ``prefix`` (recursively)."""
        try:
            async for batch in obstore.list(self.store, prefix, chunk_size=1000):
                for meta in batch:
                    yield meta["path"]
        except BaseError as err:
            raise self.error(err, prefix) from None

    async def list_folders(self, prefix: str) -> list[str]:
        """The immediate sub-folders of ``prefix`` (each ending in ``/``)."""
        try:
            result = await obstore.list_with_delimiter_async(self.store, prefix or None)
        except BaseError as err:
            raise self.error(err, prefix) from None
        return [p.rstrip("/") + "/" for p in result["common_prefixes"]]


_PART_SIZE = 8 << 20
"""Multipart upload part size: files larger than this go up in parallel parts."""


def _is_connection_error(err: BaseException) -> bool:
    text = str(err)
    return any(
        marker in text
        for marker in (
            "error sending request",
            "Connection refused",
            "connection closed",
            "connection error",
            "dns error",
            "timed out",
            "operation timed out",
            "tcp connect error",
        )
    )
