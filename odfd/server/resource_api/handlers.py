"""The resource protocol's routes.

* ``GET /<context>/<version>/<type>``: ``{"items": [...]}``, the resources of that type in the
  account (``?account=``: a name or DID; absent or empty: the token's), filtered by ``?name=``
  (a pattern, ``%`` any run of characters) and ``?labelSelector=key=value,...`` (repeatable).
* ``POST /<context>/<version>/<type>``: apply (create or update) the manifest in the body (JSON
  or YAML; a list or several YAML documents apply as one batch, all validated before any is
  stored); answers the resource as stored, with the status its controller reached (201 when it
  was created), or ``{"items": [...]}`` for a batch.
* ``GET /<context>/<version>/<type>/<id|did|name>``: one resource; with ``?watch=true`` a stream
  of ``{"type": "ADDED"|"MODIFIED"|"DELETED", "object": ...}`` lines (NDJSON), one now and one
  at each change of its generation or status, until ``timeoutSeconds`` (default 60) or deletion.
* ``DELETE /<context>/<version>/<type>/<id|did|name>``: the resource as it was.
* ``GET /flow/v1alpha1/flow/<ref>/runs``, ``GET /sink/v1alpha1/webhooktarget/<ref>/deliveries``:
  ``{"items": [...]}``, what the flow or webhook target did, newest first (``?limit=``, 100).

Errors are ``{"message": ...}`` naming the document and field (400), the token (401/403) or the
resource (404). Secrets come back only as the ciphertext the node stored.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from multidict import CIMultiDict

from odfd.app.flow_history import (
    DEFAULT_LIMIT,
    HistoryQuery,
    delivery_document,
    flow_runs,
    run_document,
    webhook_deliveries,
)
from odfd.app.grouped_applies import GroupedApplies
from odfd.app.manifest_bodies import body_manifests
from odfd.app.manifest_secrets import applied_literal_secrets
from odfd.app.resource_service import (
    UNSUBSCRIBED,
    AccountScope,
    Reconcile,
    delete_and_undo,
    find_resource,
    list_resources,
    resource_documents,
    watch_resource,
)
from odfd.app.resource_types import TYPES, ResourceType, type_of
from odfd.app.resources import DEFAULT_ACCOUNT, Manifest, ResourceKey
from odfd.app.selectors import Selector, parse_label_arguments
from odfd.app.write_log import Actor
from odfd.errors import ManifestError
from odfd.server.query_api.errors import error_response
from odfd.server.resource_api.access import Denied, ResourceAccess
from protocol.errors import OdfError
from protocol.identity import AccountName
from storage.catalog.resources import ResourceNotFoundError, ResourceRecord

if TYPE_CHECKING:
    from odfd.app.node import Node

MAX_WATCH_SECONDS = 600.0
_CONTEXTS = sorted({t.schema.split("/")[-3] for t in TYPES})
COLLECTION = "/{context}/{version}/{type}"
ITEM = COLLECTION + "/{ref}"
RUNS = "/flow/v1alpha1/flow/{ref}/runs"
DELIVERIES = "/sink/v1alpha1/webhooktarget/{ref}/deliveries"
ROUTES = [
    ("GET", COLLECTION),
    ("POST", COLLECTION),
    ("GET", ITEM),
    ("DELETE", ITEM),
    ("GET", RUNS),
    ("GET", DELIVERIES),
]
"""Every route (method, path as ``/openapi.json`` documents it)."""
_PATTERNS = {
    "context": "|".join(_CONTEXTS),
    "version": "v[0-9][a-z0-9]*",
    "type": "[A-Za-z]+",
    "ref": "[^/]+",
}
"""What each path part matches (only known contexts, so dataset routes are left alone)."""


def _routed(path: str) -> str:
    for part, pattern in _PATTERNS.items():
        path = path.replace("{" + part + "}", "{" + part + ":" + pattern + "}")
    return path


@dataclass(frozen=True, slots=True)
class _Path:
    kind: ResourceType

    @classmethod
    def of(cls, request: web.Request) -> _Path:
        """The type the path names, at the context and version that type has here."""
        info = request.match_info
        try:
            kind = type_of(info["type"])
        except ManifestError as err:
            raise _NotFound(str(err)) from None
        context, version, _ = kind.schema.split("/")[-3:]
        if (info["context"], info["version"]) != (context, version):
            raise _NotFound(
                f"this node serves {kind.name} at /{context}/{version}/{kind.name.lower()}"
            )
        return cls(kind)


class _NotFound(Exception):
    pass


class ResourceApi:
    """Mounts the routes on a server's app (``odfd.server.app.Mount``). ``node`` gives the node
    at each request (a daemon's reload swaps it); ``reconcile`` runs the controllers after an
    apply (the daemon's own, else in the server's process)."""

    def __init__(
        self,
        node: Callable[[], Node],
        reconcile: Reconcile,
    ) -> None:
        self._node = node
        self._access = ResourceAccess()
        self._applies = GroupedApplies(reconcile)

    def __call__(self, app: web.Application) -> None:
        handlers = (self.list, self.apply, self.get, self.delete, self.runs, self.deliveries)
        for (method, path), handler in zip(ROUTES, handlers, strict=True):
            app.router.add_route(method, _routed(path), _guarded(handler))

    async def list(self, request: web.Request) -> web.StreamResponse:
        path = _Path.of(request)
        scope = await self._scope(request, write=False)
        labels = parse_label_arguments(request.query.getall("labelSelector", []))
        selector = Selector(path.kind.schema, request.query.get("name") or None, labels)
        workspace = self._node().workspace
        records = await list_resources(workspace, selector, scope)
        return web.json_response({"items": await resource_documents(workspace, records)})

    async def get(self, request: web.Request) -> web.StreamResponse:
        path = _Path.of(request)
        scope = await self._scope(request, write=False)
        workspace = self._node().workspace
        record = await find_resource(workspace, path.kind.schema, request.match_info["ref"], scope)
        if request.query.get("watch", "").lower() in ("true", "1"):
            return await self._watch(request, record)
        return web.json_response((await resource_documents(workspace, [record]))[0])

    async def apply(self, request: web.Request) -> web.StreamResponse:
        path = _Path.of(request)
        scope = await self._scope(request, write=True)
        if not (scope is None or isinstance(scope, AccountName)):
            raise ManifestError("?account= of an apply names one account by name")
        manifests, batch = body_manifests(
            await request.read(), yaml="yaml" in request.content_type, kind=path.kind, account=scope
        )
        node = self._node()
        warnings = _secret_warnings(manifests)
        answered = await self._applies.apply(node.workspace, manifests, await self._actor(request))
        # what is stored now: the controllers have written each one's status
        if not batch:
            created = answered.applied[0].result.change == "created"
            return web.json_response(
                answered.documents[0], status=201 if created else 200, headers=warnings
            )
        return web.json_response({"items": answered.documents}, headers=warnings)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        path = _Path.of(request)
        scope = await self._scope(request, write=True)
        node = self._node()
        record = await find_resource(
            node.workspace, path.kind.schema, request.match_info["ref"], scope
        )
        shown = (await resource_documents(node.workspace, [record]))[0]
        [deleted] = await delete_and_undo(
            node, [ResourceKey(record.schema, record.name)], actor=await self._actor(request)
        )
        if deleted.unsubscribed is not None:  # what deleting it undid at its source, or not
            shown["status"]["conditions"][UNSUBSCRIBED] = {
                "status": "False" if deleted.unsubscribed.error else "True",
                "message": str(deleted.unsubscribed),
            }
        return web.json_response(shown)

    async def runs(self, request: web.Request) -> web.StreamResponse:
        query = await self._history_query(request)
        runs = await flow_runs(self._node().workspace, query)
        return web.json_response({"items": [run_document(r) for r in runs]})

    async def deliveries(self, request: web.Request) -> web.StreamResponse:
        query = await self._history_query(request)
        found = await webhook_deliveries(self._node().workspace, query)
        return web.json_response({"items": [delivery_document(d) for d in found]})

    async def _history_query(self, request: web.Request) -> HistoryQuery:
        scope = await self._scope(request, write=False)
        try:
            limit = int(request.query.get("limit", DEFAULT_LIMIT))
        except ValueError:
            raise ManifestError("?limit= takes a whole number") from None
        return HistoryQuery(request.match_info["ref"], limit, scope)

    async def _actor(self, request: web.Request) -> Actor:
        """Who a write is recorded as in the audit trail: the token's account."""
        requester = await self._access.authorize(request, write=True)
        return Actor(str(requester.account or DEFAULT_ACCOUNT), "http")

    async def _scope(self, request: web.Request, *, write: bool) -> AccountScope:
        """The account the request acts upon (``?account=``, else the token's)."""
        return (await self._access.authorize(request, write=write)).scope

    async def _watch(self, request: web.Request, record: ResourceRecord) -> web.StreamResponse:
        try:
            timeout = float(request.query.get("timeoutSeconds", 60))
        except ValueError:
            raise ManifestError("?timeoutSeconds= takes a number of seconds") from None
        timeout = max(0.0, min(timeout, MAX_WATCH_SECONDS))
        workspace = self._node().workspace
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        async for kind, shown in watch_resource(workspace, record, timeout):
            document = (await resource_documents(workspace, [shown]))[0]
            line = json.dumps({"type": kind, "object": document}) + "\n"
            await response.write(line.encode())
        await response.write_eof()
        return response


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(handler: Handler) -> Handler:
    """Failures answered as ``{"message": ...}`` with the status that says whose they are."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except Denied as denied:
            headers = {"WWW-Authenticate": "Bearer"} if denied.status == 401 else {}
            response = error_response(denied.status, denied.message)
            response.headers.update(headers)
            return response
        except (_NotFound, ResourceNotFoundError) as err:
            return error_response(404, str(err))
        except ManifestError as err:
            return error_response(400, str(err))
        except OdfError as err:
            return error_response(500, f"Internal error: {err}")

    return guarded


def _secret_warnings(manifests: list[Manifest]) -> CIMultiDict[str]:
    """A ``Warning`` header (code 299, RFC 7234's form, as Kubernetes' API sends its warnings)
    for each credential a ``Dataset`` manifest holds in the clear, as ``odfd add``/``apply``
    print them."""
    return CIMultiDict(
        ("Warning", '299 - "' + secret.message().replace('"', '\\"') + '"')
        for secret in applied_literal_secrets(manifests)
    )
