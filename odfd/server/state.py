"""What every request handler shares: the workspace, the config, the URL signer, the uploads
of push sessions in progress, how a URL path names a dataset, and who the request speaks for.

Every request is authorized once (:func:`authorize`, a middleware): its bearer token becomes a
:class:`~odfd.app.authorization.Principal` (an unknown, expired or revoked token is refused with
401) and the node's policy is fetched from its cache; handlers then ask :meth:`ServerState.decide`
for each dataset, and a dataset the request may not read does not exist for it."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Handler

from odfd.app.authorization import (
    ANONYMOUS,
    Action,
    Decision,
    Policy,
    PolicyCache,
    Principal,
    principal_of,
)
from odfd.config import ServerConfig
from odfd.server.pull_answers import PullAnswers
from odfd.server.refusals import bad_token
from odfd.server.signing import UrlSigner
from protocol.errors import ParseError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef
from storage.catalog import DatasetRecord
from storage.catalog.reader import CatalogReader
from storage.catalog.versioned_cache import VersionedCache
from storage.dataset import Dataset
from storage.workspace import Workspace

STATE_KEY: web.AppKey[ServerState] = web.AppKey("odfd_server_state")
SELF_JUDGED_KEY: web.AppKey[frozenset[str]] = web.AppKey("odfd_self_judged_paths", frozenset)
"""Paths whose handler says itself why a token is refused (``/platform/token/validate``, in the
reference's words): :func:`authorize` lets a refused token through to them, with no principal."""
_KEPT_LOOKUPS = 1024
"""Dataset paths and opened datasets kept per catalog version (least recently used first out)."""
_PRINCIPAL: web.RequestKey[Principal] = web.RequestKey("odfd_principal", Principal)
_POLICY: web.RequestKey[Policy] = web.RequestKey("odfd_policy", Policy)


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
    settings: Callable[[], ServerConfig]
    """The server's settings as they are now (a daemon's reload changes them): every request
    reads them through :attr:`config`, never a copy taken at start-up."""
    signer: UrlSigner
    """Signs object URLs with the key and lifetime of start-up (URLs it signed stay valid)."""
    uploads: dict[str, UploadSession] = field(default_factory=dict)
    pull_answers: PullAnswers = field(default_factory=PullAnswers)
    """Smart Transfer Protocol answers of the intervals pulled last (``odfd.server.pull_answers``)."""
    withheld: set[DatasetId] = field(default_factory=set)
    """Datasets not served (the daemon withholds those whose last audit failed)."""
    reader: CatalogReader | None = None
    """Resolves dataset names on a read-only connection of its own while the app runs, so
    serving never waits behind another task's catalog transaction (a daemon's syncs)."""
    policies: PolicyCache | None = None
    _found: VersionedCache[str, tuple[DatasetRecord | None]] = field(
        default_factory=lambda: VersionedCache(_KEPT_LOOKUPS)
    )
    """Dataset paths as :meth:`find` resolved them, kept while the catalog is unchanged."""
    _opened: VersionedCache[DatasetId, Dataset] = field(
        default_factory=lambda: VersionedCache(_KEPT_LOOKUPS)
    )
    """Datasets :meth:`open_dataset` opened, kept while the catalog is unchanged."""

    @classmethod
    def create(
        cls,
        workspace: Workspace,
        config: ServerConfig,
        settings: Callable[[], ServerConfig] | None = None,
    ) -> ServerState:
        """``settings``: where the current settings are read (default: ``config``, fixed)."""
        current = settings or (lambda: config)
        state = cls(workspace, current, UrlSigner(config.url_signing_key, config.url_ttl_seconds))
        state.policies = PolicyCache(workspace, lambda alias: state.config.is_private(alias))
        return state

    @property
    def config(self) -> ServerConfig:
        return self.settings()

    def principal(self, request: web.Request | None) -> Principal:
        """Who ``request`` speaks for (anonymous outside a request or before authorization)."""
        if request is None:
            return ANONYMOUS
        return request.get(_PRINCIPAL, ANONYMOUS)

    def policy(self, request: web.Request | None) -> Policy:
        """The node's policy as the request's authorization fetched it (outside a request: no
        relations, only the ``[server] private`` patterns)."""
        policy = None if request is None else request.get(_POLICY)
        return policy if policy is not None else Policy(is_private=self.config.is_private)

    def decide(self, request: web.Request | None, action: Action, alias: str) -> Decision:
        return self.policy(request).decide(self.principal(request), action, alias)

    def decide_account(self, request: web.Request, action: Action, account: str) -> Decision:
        """What the request may do to the resources and Sources of ``account``."""
        return self.policy(request).decide_account(self.principal(request), action, account)

    def visible(self, record: DatasetRecord, request: web.Request | None) -> bool:
        """Whether the request may read the dataset (when not, the dataset does not exist for
        it); outside a request, a private dataset (``[server] private``) is not visible."""
        return self.decide(request, Action.READ, record.alias).allowed

    def signed_in(self, request: web.Request | None) -> bool:
        """Whether ``request`` speaks for an account (which datasets exist for it is still
        decided dataset by dataset)."""
        return self.principal(request).account is not None

    def is_admin(self, request: web.Request) -> bool:
        return self.principal(request).is_admin

    async def find(
        self, path: str, request: web.Request | None = None, *, signed: bool = False
    ) -> DatasetRecord | None:
        """``None`` when nothing has that name (or it is private and ``request`` has no token that
        may read it, unless ``signed``: the caller checked a URL this server signed for it); a
        withheld dataset is refused (403) with the reason, so clients report why instead of
        "not found"."""
        record = await self._record_at(path)
        if (
            record is not None
            and not signed
            and request is not None
            and not self.visible(record, request)
        ):
            return None
        if record is not None and record.id in self.withheld:
            raise web.HTTPForbidden(
                text=f"dataset {record.alias} is withheld by this node: its latest audit "
                "failed (it is served again once an audit passes)"
            )
        return record

    def _catalog_version(self) -> int | None:
        """What answers read from the catalog are kept by: ``PRAGMA data_version`` of the
        server's reader, which moves with every commit of any other connection (a push, a
        pull, a rename, a deletion, a relation); ``None`` (nothing kept) without a reader or
        while the catalog is busy."""
        return None if self.reader is None else self.reader.data_version()

    async def _record_at(self, path: str) -> DatasetRecord | None:
        """The dataset ``path`` names, as of the catalog now. Every download GET of a pull asks
        this: the answer is kept while the catalog is unchanged (parsing the path and building
        the record cost ~0.05 ms a GET, a thousand GETs a pull)."""
        version = self._catalog_version()
        kept = self._found.get(path, version)
        if kept is not None:
            return kept[0]
        try:
            ref = parse_dataset_path(path)
        except ParseError:
            return None
        record = await self._resolve(ref)
        self._found.put(path, version, (record,))
        return record

    def open_dataset(self, record: DatasetRecord) -> Dataset:
        """The dataset's folder, opened once while the catalog is unchanged (opening one builds
        its stores, paths and chain: ~0.1 ms, on every download GET of a pull); any commit, such
        as a head move, a rename or a deletion, opens it afresh."""
        version = self._catalog_version()
        dataset = self._opened.get(record.id, version)
        if dataset is None:
            dataset = self.workspace.open_dataset(record.id)
            self._opened.put(record.id, version, dataset)
        return dataset

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
        """The account a write is done as (recorded in the write log); None: anonymous. Whether
        it may write to a dataset is :meth:`decide`'s to say."""
        return self.principal(request).account


@web.middleware
async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Establish who the request speaks for, once, before any handler runs."""
    state = request.app[STATE_KEY]
    principal = await principal_of(
        state.workspace, state.config, bearer_token(request), state.reader
    )
    if principal is None:
        if request.path in request.app.get(SELF_JUDGED_KEY, frozenset()):
            return await handler(request)
        raise await bad_token(state.workspace, bearer_token(request))
    request[_PRINCIPAL] = principal
    assert state.policies is not None
    request[_POLICY] = await state.policies.policy(state.reader)
    return await handler(request)


def bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
