"""Files uploaded ahead of an ingest, as the reference's upload service (``UploadService``): a
client prepares an upload (name, declared length and media type), sends the file to the URL it
gets, then ingests it with ``POST /{dataset}/ingest?uploadToken=…``.

The upload token is the reference's, on the wire: URL-safe base64 of a JSON object
``{"upload_id", "file_name", "owner_account_id", "content_length", "content_type"}``. The reference
trusts the token's fields (its own comment says the length can be spoofed); here the token only
names an upload, and each use checks it against what the node recorded when it prepared the
upload (owner, name, length, media type, expiry), so an edited token is an unknown one.

Each upload is a folder under the workspace's ``uploads/`` (``<owner>/<upload_id>/``) holding
``upload.json`` (what was prepared) and, once sent, ``content`` (the file: its client-given name
never becomes a path). Uploads expire ``[server] upload_ttl`` after they were prepared and are
removed by :meth:`Uploads.sweep`, which every prepare runs (and a daemon hourly).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.resources import account_handle
from odfd.errors import OdfdError
from protocol.identity import AccountName

if TYPE_CHECKING:
    from odfd.app.node import Node

log = logging.getLogger(__name__)

_RECORD = "upload.json"
_CONTENT = "content"
_MAX_FILE_NAME = 255
_DID_PREFIX = "did:odf:"


class UploadError(OdfdError):
    """An upload request the node refuses; ``status`` is the HTTP status that says why."""

    status = 400


class ContentTooLargeError(UploadError):
    """More bytes than the node's ``[server] upload_max_bytes``."""


class ContentLengthMismatchError(UploadError):
    """The file sent is not as long as the length declared when the upload was prepared."""


class BadUploadTokenError(UploadError):
    """Not an upload token at all (not base64 of the token's JSON)."""


class ForeignUploadError(UploadError):
    """The upload belongs to another account."""

    status = 403


class UploadNotFoundError(UploadError):
    """No such upload (never prepared, expired and removed, or its token was edited), or its
    file was never sent."""

    status = 404


@dataclass(frozen=True, slots=True)
class UploadToken:
    """The reference's upload token (``UploadToken``), field for field."""

    upload_id: str
    file_name: str
    owner_account_id: str
    content_length: int
    content_type: str | None = None

    def encode(self) -> str:
        fields = {key: value for key, value in asdict(self).items() if value is not None}
        return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()

    @classmethod
    def decode(cls, text: str) -> UploadToken:
        try:
            fields = json.loads(base64.urlsafe_b64decode(text.encode()))
        except (binascii.Error, ValueError, UnicodeError):
            raise BadUploadTokenError(
                "uploadToken is not an upload token of this node (URL-safe base64 of its JSON)"
            ) from None
        if not isinstance(fields, dict):
            raise BadUploadTokenError("uploadToken does not hold a JSON object")
        texts = ("upload_id", "file_name", "owner_account_id")
        for name in texts:
            if not isinstance(fields.get(name), str):
                raise BadUploadTokenError(f"uploadToken needs a string field {name}")
        length = fields.get("content_length")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise BadUploadTokenError("uploadToken needs a non-negative integer content_length")
        content_type = fields.get("content_type")
        if content_type is not None and not isinstance(content_type, str):
            raise BadUploadTokenError("uploadToken's content_type must be a string")
        return cls(
            fields["upload_id"],
            fields["file_name"],
            fields["owner_account_id"],
            length,
            content_type,
        )


@dataclass(frozen=True, slots=True)
class UploadLimits:
    max_bytes: int
    """The largest file one upload holds (``[server] upload_max_bytes``)."""
    ttl: float
    """Seconds an upload stays usable after it was prepared (``[server] upload_ttl``)."""


def owner_id(account: str) -> str:
    """The account's id as the reference's token carries it: its DID without ``did:odf:``."""
    return account_handle(AccountName(account)).id.removeprefix(_DID_PREFIX)


def check_file_name(name: str) -> None:
    """A plain file name: it says the format (by extension), never where anything is stored."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise UploadError(f"fileName {name!r} is not a plain file name")
    if len(name.encode()) > _MAX_FILE_NAME:
        raise UploadError(f"fileName is longer than {_MAX_FILE_NAME} bytes")


def too_large(limits: UploadLimits) -> ContentTooLargeError:
    return ContentTooLargeError(
        f"Content too large: this node takes uploads of at most {limits.max_bytes} bytes"
    )


def length_mismatch(actual: int, declared: int) -> ContentLengthMismatchError:
    return ContentLengthMismatchError(
        f"Actual content length {actual} does not match the initially declared length {declared}"
    )


class Uploads:
    """The uploads of a workspace (folder ``root``), under ``limits``."""

    def __init__(self, root: Path, limits: UploadLimits) -> None:
        self.root = root
        self.limits = limits

    async def prepare(
        self, account: str, file_name: str, content_type: str | None, content_length: int
    ) -> UploadToken:
        """A new upload of ``account`` (expired ones are removed first)."""
        check_file_name(file_name)
        if content_length < 0:
            raise UploadError("contentLength must not be negative")
        if content_length > self.limits.max_bytes:
            raise too_large(self.limits)
        await asyncio.to_thread(self.sweep)
        token = UploadToken(
            upload_id=uuid.uuid4().hex,
            file_name=file_name,
            owner_account_id=owner_id(account),
            content_length=content_length,
            content_type=content_type or None,
        )
        record = {"token": asdict(token), "expiresAt": time.time() + self.limits.ttl}
        await asyncio.to_thread(self._write_record, self._folder(token), record)
        return token

    async def save(self, account: str, token: UploadToken, chunks: AsyncIterator[bytes]) -> None:
        """Stores the file ``chunks`` make as the upload's content (replacing one sent before),
        once it is whole and of the declared length; a longer file is read on only up to the
        node's limit, to say how long it was."""
        folder = await self._live(account, token)
        partial = folder / f".{uuid.uuid4().hex}.part"
        size = 0
        out = await asyncio.to_thread(open, partial, "wb")
        try:
            async for chunk in chunks:
                size += len(chunk)
                if size > self.limits.max_bytes:
                    raise too_large(self.limits)
                if size <= token.content_length:
                    await asyncio.to_thread(out.write, chunk)
                elif size - len(chunk) < token.content_length:
                    await asyncio.to_thread(out.write, chunk[: token.content_length - size])
            await asyncio.to_thread(out.close)
            if size != token.content_length:
                raise length_mismatch(size, token.content_length)
            await asyncio.to_thread(os.replace, partial, folder / _CONTENT)
        finally:
            await asyncio.to_thread(out.close)
            await asyncio.to_thread(partial.unlink, True)

    async def content(self, token: UploadToken, account: str | None = None) -> Path:
        """The upload's file, whole and of the declared length; ``account``: who asks (None:
        anyone holding the token, as the reference lets anyone read an upload by its token)."""
        folder = await self._live(account, token)
        path = folder / _CONTENT
        try:
            actual = (await asyncio.to_thread(path.stat)).st_size
        except FileNotFoundError:
            raise UploadNotFoundError(
                f"upload {token.upload_id}: its file was never sent (send it to the upload URL "
                "first)"
            ) from None
        if actual != token.content_length:
            raise length_mismatch(actual, token.content_length)
        return path

    def sweep(self) -> int:
        """Removes expired uploads; the count removed."""
        removed = 0
        now = time.time()
        for record_path in self.root.glob(f"*/*/{_RECORD}"):
            folder = record_path.parent
            try:
                expired = json.loads(record_path.read_text())["expiresAt"] <= now
            except (OSError, ValueError, KeyError, TypeError):
                expired = True  # a record torn by a crash: nothing can use it
            if expired:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        if removed:
            log.info("removed %d expired upload(s)", removed)
        return removed

    async def _live(self, account: str | None, token: UploadToken) -> Path:
        """The upload's folder, after checking the token names an upload this node prepared
        for ``account`` (None: any) that has not expired."""
        if account is not None and owner_id(account) != token.owner_account_id:
            raise ForeignUploadError(f"upload {token.upload_id} belongs to another account")
        folder = self._folder(token)
        try:
            record = await asyncio.to_thread(_read_json, folder / _RECORD)
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict) or record.get("token") != asdict(token):
            raise UploadNotFoundError(
                f"no upload {token.upload_id} on this node (never prepared, expired, or its "
                "token was altered)"
            )
        if record.get("expiresAt", 0) <= time.time():
            raise UploadNotFoundError(
                f"upload {token.upload_id} has expired (uploads are kept for "
                f"{self.limits.ttl:g} s; prepare a new one)"
            )
        return folder

    def _folder(self, token: UploadToken) -> Path:
        for part in (token.owner_account_id, token.upload_id):
            if not part or not part.isalnum():
                raise UploadNotFoundError(f"no upload {token.upload_id!r} on this node")
        return self.root / token.owner_account_id / token.upload_id

    @staticmethod
    def _write_record(folder: Path, record: dict[str, object]) -> None:
        folder.mkdir(parents=True, exist_ok=False)
        partial = folder / f".{_RECORD}.part"
        partial.write_text(json.dumps(record))
        os.replace(partial, folder / _RECORD)


def _read_json(path: Path) -> object:
    return json.loads(path.read_text())


def uploads_of(node: Node) -> Uploads:
    """The node's uploads under its current ``[server]`` limits."""
    server = node.config.server
    return Uploads(
        node.workspace.layout.uploads_dir, UploadLimits(server.upload_max_bytes, server.upload_ttl)
    )
