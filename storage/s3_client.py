"""One client per S3 bucket (``obstore``, bindings to the Rust ``object_store`` crate the
reference uses) whose failures become odfd's typed errors; locations, URLs and credentials are in
``storage.s3_settings``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

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

from storage.s3_settings import S3Location, S3Settings
from storage.stores.remote import RemoteStoreError, RemoteUnavailableError

if TYPE_CHECKING:
    from obstore import PutMode


class S3Error(RemoteStoreError):
    """An S3 request failed in a way that is neither a missing object nor a lost race."""


class S3AccessDeniedError(S3Error):
    """The server refused the credentials (wrong key or secret, or no permission)."""


class S3BucketNotFoundError(S3Error):
    """The bucket does not exist on the server."""


class S3ConflictError(S3Error):
    """A conditional write lost: the key exists (create) or changed (update)."""


# --- the client ------------------------------------------------------------------------------------


class S3Bucket:
    """One bucket's client; every call turns ``obstore`` errors into odfd's (messages name the
    URL, never a credential)."""

    def __init__(self, location: S3Location, settings: S3Settings | None = None) -> None:
        settings = settings or S3Settings()
        self.location = location
        endpoint = settings.endpoint_for(location)
        self.where = f"{endpoint or 's3:/'}/{location.bucket}"
        self.store = S3Store(
            location.bucket,
            config=settings.resolve(location),  # type: ignore[arg-type]  # keys of S3Config
            client_options={
                # plain HTTP exactly when the endpoint says so (MinIO, SeaweedFS on a laptop)
                "allow_http": endpoint is not None and endpoint.startswith("http:"),
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

    async def get_range(self, key: str, start: int, length: int) -> memoryview:
        """Bytes ``start`` to ``start + length`` of ``key``: a view of obstore's buffer, never
        copied (a pull hashes and writes it as it is)."""
        try:
            return memoryview(
                await obstore.get_range_async(self.store, key, start=start, length=length)
            )
        except BaseError as err:
            raise self.error(err, key) from None

    async def get_start(self, key: str, length: int) -> tuple[memoryview, int] | None:
        """The first ``length`` bytes of ``key`` (fewer if it is shorter) and its whole size, in
        one request (a HEAD saved per object read); ``None`` when absent."""
        try:
            result = await obstore.get_async(self.store, key, options={"range": (0, length)})
            return memoryview(await result.bytes_async()), result.meta["size"]
        except (NotFoundError, FileNotFoundError):
            return None
        except BaseError as err:
            if _RANGE_NOT_SATISFIABLE not in str(err):
                raise self.error(err, key) from None
        # A range from byte 0 is refused only for an empty object: its HEAD says so.
        found = await self.head(key)
        return None if found is None else (memoryview(b""), found[0])

    async def put(self, key: str, body: Any, *, mode: PutMode | None = None) -> str | None:
        """Store ``body`` (bytes, a local ``Path`` or an async iterable of chunks; large ones
        go up as multipart uploads, which stay invisible unless completed) under ``key``;
        returns the new etag. ``S3ConflictError`` if ``mode``'s precondition fails."""
        try:
            result = await obstore.put_async(
                self.store, key, body, mode=mode, chunk_size=PART_SIZE, max_concurrency=8
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


_RANGE_NOT_SATISFIABLE = "416 Range Not Satisfiable"
PART_SIZE = 8 << 20
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
