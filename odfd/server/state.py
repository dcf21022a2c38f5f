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
from odfd.app.served_datasets import ServedDatasets
from odfd.config import ServerConfig
from odfd.server.pull_answers import PullAnswers
from odfd.server.refusals import bad_token
from odfd.server.signing import UrlSigner
from protocol.identity import DatasetId
from storage.catalog import DatasetRecord
from storage.dataset import Dataset
from storage.workspace import Workspace

STATE_KEY: web.AppKey[ServerState] = web.AppKey("odfd_server_state")
SELF_JUDGED_KEY: web.AppKey[frozenset[str]] = web.AppKey("odfd_self_judged_paths", frozenset)
"""Paths whose handler says itself why a token is refused (``/platform/token/validate``, in the
reference's words): :func:`authorize` lets a refused token through to them, with no principal."""
_PRINCIPAL: web.RequestKey[Principal] = web.RequestKey("odfd_principal", Principal)
_POLICY: web.RequestKey[Policy] = web.RequestKey("odfd_policy", Policy)


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
    policies: PolicyCache | None = None
    datasets: ServedDatasets = field(init=False)
    """Datasets by URL path and opened, kept while the catalog is unchanged; resolved on a
    read-only connection of their own while the app runs (``ServedDatasets.reading``)."""

    def __post_init__(self) -> None:
        self.datasets = ServedDatasets(self.workspace)

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
        record = await self.datasets.at(path)
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
        state.workspace, state.config, bearer_token(request), state.datasets.reader
    )
    if principal is None:
        if request.path in request.app.get(SELF_JUDGED_KEY, frozenset()):
            return await handler(request)
        raise await bad_token(state.workspace, bearer_token(request))
    request[_PRINCIPAL] = principal
    assert state.policies is not None
    request[_POLICY] = await state.policies.policy(state.datasets.reader)
    return await handler(request)


def bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
