"""``http(s)://`` read by the Simple Transfer Protocol (RFC-007): ``refs/head``, blocks by hash,
data and checkpoint files downloaded in parallel, each request bound by the peer time-outs
(``HttpLimits``) and, with a token, authorised by it. A node's dataset listing at the base URL is
what ``odfd search`` reads when the node has no GraphQL search. Read-only: pushing takes the
Smart Transfer Protocol (``smart_http``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from odfd.sync.errors import SyncError
from odfd.sync.transport.base import Listed, RemoteView, SourceHead, read_only_dataset
from odfd.sync.transport.plain import PlainTransport
from storage.stores.http_limits import HttpLimits
from storage.stores.remote import RemoteUnavailableError

if TYPE_CHECKING:
    import aiohttp

    from odfd.sync.objects import ChunkSource, ObjectRef
    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget
    from storage.dataset import Dataset

LISTING_TIMEOUT = 30.0
"""Seconds a repository may take to send its listing."""


@dataclass(frozen=True, slots=True)
class SimpleHttpTransport(PlainTransport):
    text: str
    """The URL as given, without a trailing slash (``odf+`` kept): how it is recorded."""
    http_base: str
    """``http(s)://…/``: where the dataset's keys are, with one trailing slash."""
    token: str | None = None
    limits: HttpLimits = HttpLimits()

    def peer_key(self) -> str:
        """``host:port`` of the server."""
        parts = urlsplit(self.http_base)
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError:
            port = 0  # a bad port: the sync reports it; any group will do until then
        return f"{(parts.hostname or '').lower()}:{port}"

    def headers(self) -> dict[str, str] | None:
        """What every request sends: the bearer token, when there is one."""
        if not self.token:
            return None
        from odfd.sync.transport.smart_client import auth_headers

        return auth_headers(self.token)

    @asynccontextmanager
    async def open(self, session: aiohttp.ClientSession) -> AsyncIterator[RemoteView]:
        from storage.stores.http import HttpClient, HttpObjectStore, HttpRefStore

        client = HttpClient(session, self.http_base, self.headers(), self.limits)
        dataset = read_only_dataset(
            lambda kind: HttpObjectStore(client, kind), HttpRefStore(client)
        )
        try:
            yield RemoteView(dataset, self.http_base, self._downloads(session, dataset))
        except RemoteUnavailableError as err:
            raise self.unreachable(err) from None

    def unreachable(self, err: RemoteUnavailableError) -> RemoteUnavailableError:
        """``err`` in the words of ``odfd sql --remote`` when nothing answered at the node's
        address (``cannot_reach``: what failed and what to check), else ``err`` itself."""
        from odfd.sync.transport.http_errors import cannot_reach, connector_error

        failure = connector_error(err)
        if failure is None:
            return err
        parts = urlsplit(self.http_base)
        origin = f"{parts.scheme}://{parts.netloc}/"  # where the connection failed
        return RemoteUnavailableError(f"{self.url}: {cannot_reach(origin, failure)}")

    def _downloads(self, session: aiohttp.ClientSession, dataset: Dataset) -> ChunkSource:
        """Objects fetched by parallel GETs with this remote's headers and time-outs."""
        from odfd.sync.objects import http_source, store_for
        from storage.stores.http import HttpObjectStore

        headers = self.headers() or {}

        def url_of(ref: ObjectRef) -> tuple[str, dict[str, str]]:
            store = store_for(dataset, ref.kind)
            assert isinstance(store, HttpObjectStore)  # opened above
            return store.url_of(ref.hash), headers

        return http_source(session, url_of, self.limits)

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        from odfd.sync.transport.probe import probe_view

        return await probe_view(self.open(session), self.url, known)

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.probe import refuse_push

        refuse_push(
            self.url,
            "the Simple Transfer Protocol is read-only; a push takes the Smart Transfer Protocol",
        )

    async def list_datasets(self) -> list[Listed]:
        """The node's datasets through its GraphQL search (``graphql_listing``), or, from a
        node without GraphQL, its JSON listing at the base URL (with the token, either way:
        private datasets are listed only for a token that may read them)."""
        import aiohttp

        from odfd.sync.transport.graphql_listing import graphql_listing

        base = self.http_base
        try:
            async with aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=LISTING_TIMEOUT)
            ) as session:
                found = await graphql_listing(session, base, self.headers())
                if found is not None:
                    return found
                async with session.get(base, headers=self.headers()) as response:
                    if response.status != 200:
                        raise SyncError(f"{base}: HTTP {response.status} for the dataset listing")
                    document = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            raise SyncError(
                f"{base}: cannot read the dataset listing: {err or type(err).__name__}"
            ) from None
        datasets = document.get("datasets") if isinstance(document, dict) else None
        if not isinstance(datasets, list):
            raise SyncError(f"{base}: the answer is not an odfd dataset listing")
        return [
            Listed(
                str(d["alias"]),
                d.get("kind"),
                str(d.get("url") or base + str(d["alias"]).lstrip("/")),
            )
            for d in datasets
            if isinstance(d, dict) and "alias" in d
        ]
