"""What every request handler shares: the workspace, the config, the URL signer, the uploads
of push sessions in progress, and how a URL path names a dataset."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from aiohttp import web

from odfd.config import ServerConfig
from odfd.server.signing import UrlSigner
from protocol.errors import ParseError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef
from storage.catalog import DatasetRecord
from storage.catalog.reader import CatalogReader
from storage.dataset import Dataset
from storage.workspace import Workspace

STATE_KEY: web.AppKey[ServerState] = web.AppKey("odfd_server_state")


def parse_dataset_path(text: str) -> DatasetRef:
    """``name`` (single-tenant), ``account/name`` (multi-tenant) or ``did:odf:…``."""
    if text.startswith("did:"):
        return DatasetRef(DatasetId.parse(text))
    return DatasetRef(DatasetAlias.parse(text))


@dataclass(slots=True)
class UploadSession:
    """Where a push session's signed uploads go (the dataset's folder, or its staging folder)."""

    dataset: Dataset


@dataclass(slots=True)
class ServerState:
    workspace: Workspace
    config: ServerConfig
    signer: UrlSigner
    uploads: dict[str, UploadSession] = field(default_factory=dict)
    withheld: set[DatasetId] = field(default_factory=set)
    """Datasets not served (the daemon withholds those whose last audit failed)."""
    reader: CatalogReader | None = None
    """Resolves dataset names on a read-only connection of its own while the app runs, so
    serving never waits behind another task's catalog transaction (a daemon's syncs)."""

    @classmethod
    def create(cls, workspace: Workspace, config: ServerConfig) -> ServerState:
        return cls(workspace, config, UrlSigner(config.url_signing_key, config.url_ttl_seconds))

    def visible(self, record: DatasetRecord, request: web.Request | None) -> bool:
        """A private dataset (``[server] private``) exists only for read and admin tokens."""
        if not self.config.is_private(record.alias):
            return True
        return self.reads_private(request)

    def reads_private(self, request: web.Request | None) -> bool:
        """Whether ``request`` carries a read or admin token (private datasets exist for it)."""
        return request is not None and self.config.may_read_private(bearer_token(request))

    def is_admin(self, request: web.Request) -> bool:
        return self.config.is_admin(bearer_token(request))

    async def find(
        self, path: str, request: web.Request | None = None, *, signed: bool = False
    ) -> DatasetRecord | None:
        """``None`` when nothing has that name (or it is private and ``request`` has no token that
        may read it, unless ``signed``: the caller checked a URL this server signed for it); a
        withheld dataset is refused (403) with the reason, so clients report why instead of
        "not found"."""
        try:
            ref = parse_dataset_path(path)
        except ParseError:
            return None
        record = await self._resolve(ref)
        if record is not None and not signed and not self.visible(record, request):
            return None
        if record is not None and record.id in self.withheld:
            raise web.HTTPForbidden(
                text=f"dataset {record.alias} is withheld by this node: its latest audit "
                "failed (it is served again once an audit passes)"
            )
        return record

    async def _resolve(self, ref: DatasetRef) -> DatasetRecord | None:
        if self.reader is None:
            return await self.workspace.try_resolve(ref)
        if ref.id is not None:
            return await self.reader.get_dataset(ref.id)
        return await self.reader.find_by_alias(str(ref.alias))

    async def require(self, path: str, request: web.Request | None = None) -> DatasetRecord:
        record = await self.find(path, request)
        if record is None:
            raise web.HTTPNotFound(text=f"no dataset {path} on this node")
        return record

    def dataset_url(self, request: web.Request, dataset_path: str) -> str:
        """The dataset's base URL as the client reaches this server."""
        base = self.config.base_url or f"{request.url.origin()}/"
        return f"{base}{dataset_path}/"

    def new_upload_session(self, dataset: Dataset) -> str:
        session_id = secrets.token_urlsafe(16)
        self.uploads[session_id] = UploadSession(dataset)
        return session_id

    async def pusher(self, request: web.Request) -> str | None:
        """The account a push is done as: the built-in account for a ``push_tokens`` token, an
        administrator for a token issued to one (``odfd login`` as it); None: not allowed. (Who
        else may push to which dataset is the authorization decision's to say.)"""
        from odfd.app.accounts import token_account
        from odfd.app.resources import DEFAULT_ACCOUNT

        token = bearer_token(request)
        if token is None:
            return None
        if token in self.config.push_tokens:
            return str(DEFAULT_ACCOUNT)
        account = await token_account(self.workspace, token)
        return account.name if account is not None and account.is_admin else None


def bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
