"""The console's pages and JSON API on the node's aiohttp server, under ``/ui``.

Reads (``GET /ui/api/…``) follow the server's visibility rules: private datasets exist only for
read and admin tokens, withheld ones are marked. The SQL box needs a read or admin token (a query
engine can reach files outside the workspace); actions (``POST``: sync a mirror, audit a dataset)
need an admin token. Tokens travel in the ``Authorization`` header, which a cross-site page cannot
set without a CORS preflight this server never grants, and every ``POST`` must also come from the
console's own origin with a JSON body."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa
from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.dataset_details import (
    SummaryCache,
    audit_history,
    block_log,
    records_history,
    schema_document,
    transform_history,
)
from odfd.app.first_pages import read_ahead
from odfd.app.flow_history import (
    HistoryQuery,
    delivery_document,
    flow_runs,
    run_document,
    webhook_deliveries,
)
from odfd.app.lineage import build_lineage
from odfd.app.presence import DataMissingError
from odfd.app.resource_service import list_resources
from odfd.app.resources import DEFAULT_ACCOUNT, kind_of, split_name
from odfd.app.row_pages import newest_rows
from odfd.app.selectors import Selector
from odfd.console.backend import ActionUnavailableError, NodeBackend
from odfd.console.node import node_info
from odfd.console.sql import SQL_BOX_ENGINE, json_cell, run_sql, run_sql_with_proof
from odfd.console.view import CatalogView
from odfd.server.state import STATE_KEY, ServerState
from protocol.errors import OdfError
from storage.catalog import DatasetRecord
from storage.catalog.resources import ResourceNotFoundError

log = logging.getLogger("odfd.console")
CONSOLE_KEY: web.AppKey[Console] = web.AppKey("odfd_console")
STATIC = Path(str(resources.files("odfd.console") / "static"))
MAX_PAGE = 500
PAGE = 100
AUDITS_SHOWN = 20
"""A dataset's newest audits its Audits tab lists."""
CONSOLE_PROVENANCE_ROWS = 100
"""Witness rows of one dataset the row detail traces further at each level (the page lists them)."""
"""Datasets per page of the list (the page's default)."""


class Console:
    """The state the console's handlers share."""

    def __init__(self, backend: NodeBackend) -> None:
        self.backend = backend
        self.view = CatalogView(backend)
        self.summaries = SummaryCache()
        self._warming: asyncio.Task[None] | None = None

    async def warm(self) -> None:
        """Reads what the first pages need (the catalog, the first page's summaries, the dataset
        graph) so that the first visitor after a start does not wait for it."""
        await asyncio.to_thread(_first_conversion)
        records = await self.view.records()
        await self.view.status()
        workspace = self.backend.workspace
        for skipped in await read_ahead(workspace, records, PAGE, self.summaries):
            if skipped.alias is None:  # a lineage page will say what is wrong
                log.warning(
                    "console warm-up skipped the dataset graph", extra={"error": str(skipped.error)}
                )
            else:  # its page will say what is wrong with it
                log.warning(
                    "console warm-up skipped a dataset",
                    extra={"dataset": skipped.alias, "error": str(skipped.error)},
                )

    async def warmed(self) -> None:
        """Returns once the warm-up started with the server is over."""
        if self._warming is not None:
            await asyncio.gather(asyncio.shield(self._warming), return_exceptions=True)

    async def start_warming(self, app: web.Application) -> None:
        self._warming = asyncio.create_task(self.warm(), name="console-warm-up")

    async def stop_warming(self, app: web.Application) -> None:
        if self._warming is not None:
            self._warming.cancel()
            await asyncio.gather(self._warming, return_exceptions=True)


def _first_conversion() -> None:
    """Arrow's first instant-with-zone to Python conversion loads time-zone support (~1.5 s)."""
    pa.array([0], pa.timestamp("ms", tz="UTC")).to_pylist()


def console_mount(backend: NodeBackend) -> Callable[[web.Application], None]:
    """Mounts the console for ``backend`` on a server's app (``odfd.server.app.create_app``)."""
    return lambda app: add_console(app, backend)


def add_console(app: web.Application, backend: NodeBackend) -> None:
    console = Console(backend)
    app[CONSOLE_KEY] = console
    app.on_startup.append(console.start_warming)
    app.on_cleanup.append(console.stop_warming)
    app.router.add_get("/ui", _redirect)
    app.router.add_get("/ui/", _index)
    app.router.add_static("/ui/static/", STATIC, append_version=False)
    routes = [
        ("GET", "/ui/api/node", _node),
        ("GET", "/ui/api/datasets", _datasets),
        ("GET", "/ui/api/mirrors", _mirrors),
        ("GET", "/ui/api/resources", _resources),
        ("GET", "/ui/api/flowruns", _flow_runs),
        ("GET", "/ui/api/webhookdeliveries", _webhook_deliveries),
        ("GET", "/ui/api/datasets/{dataset}", _overview),
        ("GET", "/ui/api/datasets/{dataset}/data", _data),
        ("GET", "/ui/api/datasets/{dataset}/blocks", _blocks),
        ("GET", "/ui/api/datasets/{dataset}/lineage", _lineage),
        ("GET", "/ui/api/datasets/{dataset}/history", _history),
        ("GET", "/ui/api/datasets/{dataset}/audits", _audits),
        ("GET", "/ui/api/datasets/{dataset}/provenance", _provenance),
        ("POST", "/ui/api/sql", _sql),
        ("POST", "/ui/api/mirrors/{name}/sync", _sync_now),
        ("POST", "/ui/api/datasets/{dataset}/audit", _audit_now),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, _guarded(handler))


def _guarded(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A dataset the page asks about may be broken (a missing slice, a corrupt block): the page
    shows the error's one line instead of a bare 500."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except OdfError as err:
            return _error(500, str(err))

    return handle


def _json(value: Any, status: int = 200) -> web.Response:
    return web.json_response(
        value, status=status, dumps=lambda v: json.dumps(v, default=str, allow_nan=False)
    )


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


def _parts(request: web.Request) -> tuple[ServerState, Console]:
    return request.app[STATE_KEY], request.app[CONSOLE_KEY]


def _int(request: web.Request, name: str, default: int, maximum: int | None = None) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"query parameter {name} must be an integer") from None
    if value < 0 or (maximum is not None and value > maximum):
        raise web.HTTPBadRequest(text=f"query parameter {name} must be 0..{maximum or 'any'}")
    return value


async def _record(request: web.Request) -> DatasetRecord:
    state, _ = _parts(request)
    try:
        return await state.require(request.match_info["dataset"], request)
    except web.HTTPForbidden:  # withheld: the console still shows why
        record = await state.datasets.at(request.match_info["dataset"])
        if record is None or not state.visible(record, request):
            raise web.HTTPNotFound(text="no such dataset") from None
        return record


# --- pages ----------------------------------------------------------------------------------------


async def _redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/ui/")


async def _index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "index.html", headers=_PAGE_HEADERS)


_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


# --- reads ----------------------------------------------------------------------------------------


def _status_by_id(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in status["datasets"]}


async def _datasets(request: web.Request) -> web.Response:
    """``?q=`` (case-insensitive substring of the alias), ``offset``, ``limit``; sorted by alias."""
    state, console = _parts(request)
    started = time.perf_counter()
    query = request.query.get("q", "").strip().lower()
    offset = _int(request, "offset", 0)
    limit = _int(request, "limit", PAGE, MAX_PAGE)
    records = [
        r
        for r in await console.view.records()
        if state.visible(r, request) and query in r.alias.lower()
    ]
    status = _status_by_id(await console.view.status())
    page = []
    for record in records[offset : offset + limit]:
        dataset = state.datasets.open(record)
        summary = await console.summaries.get(dataset, record)
        entry = status.get(str(record.id), {})
        page.append(
            {
                "alias": record.alias,
                "id": str(record.id),
                "kind": record.kind.value,
                "head": None if record.head is None else record.head.to_multibase(),
                "blocks": 0 if record.head_sequence is None else record.head_sequence + 1,
                "records": summary.records,
                "size": summary.size,
                "lastUpdate": summary.last_update,
                "mirrorOf": entry.get("mirrorOf"),
                "lastSync": entry.get("lastSync"),
                "lagBlocks": entry.get("lagBlocks"),
                "lastAudit": entry.get("lastAudit"),
                "ipns": entry.get("ipns"),
                "failing": entry.get("failing", False),
                "withheld": record.id in state.withheld,
                "private": state.config.is_private(record.alias),
            }
        )
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    return _json({"total": len(records), "offset": offset, "datasets": page, "ms": elapsed})


async def _overview(request: web.Request) -> web.Response:
    state, console = _parts(request)
    record = await _record(request)
    dataset = state.datasets.open(record)
    summary = await console.summaries.get(dataset, record)
    status = _status_by_id(await console.view.status()).get(str(record.id), {})
    return _json(
        {
            "alias": record.alias,
            "id": str(record.id),
            "kind": record.kind.value,
            "head": None if record.head is None else record.head.to_multibase(),
            "blocks": 0 if record.head_sequence is None else record.head_sequence + 1,
            **summary.to_json(),
            "schema": await schema_document(dataset),
            "transforms": [step.to_json() for step in await transform_history(dataset)],
            "status": status,
            "withheld": record.id in state.withheld,
            "private": state.config.is_private(record.alias),
        }
    )


async def _data(request: web.Request) -> web.Response:
    """The newest rows first, ``limit`` of them after skipping ``offset``."""
    state, _ = _parts(request)
    record = await _record(request)
    offset = _int(request, "offset", 0)
    limit = _int(request, "limit", 50, MAX_PAGE)
    dataset = state.datasets.open(record)
    try:
        page = await newest_rows(record, dataset, offset=offset, limit=limit)
    except DataMissingError as err:
        return _error(500, str(err))
    rows = [[json_cell(value) for value in row] for row in page.rows]
    return _json({"columns": page.columns, "rows": rows, "offset": offset, "total": page.total})


async def _blocks(request: web.Request) -> web.Response:
    state, _ = _parts(request)
    record = await _record(request)
    before = request.query.get("before")
    limit = _int(request, "limit", 50, MAX_PAGE)
    dataset = state.datasets.open(record)
    entries = await block_log(
        dataset, limit=limit, before=None if before is None else _int(request, "before", 0)
    )
    return _json({"blocks": entries})


async def _lineage(request: web.Request) -> web.Response:
    state, console = _parts(request)
    record = await _record(request)
    graph = await build_lineage(
        state.workspace,
        str(record.id),
        downstream=True,
        visible=lambda r: state.visible(r, request),
        listed=await console.view.records(),
    )
    return _json(graph.to_json())


async def _history(request: web.Request) -> web.Response:
    state, _ = _parts(request)
    record = await _record(request)
    return _json({"points": await records_history(state.datasets.open(record))})


async def _audits(request: web.Request) -> web.Response:
    state, _ = _parts(request)
    record = await _record(request)
    return _json({"audits": await audit_history(state.workspace, record.id, AUDITS_SHOWN)})


async def _mirrors(request: web.Request) -> web.Response:
    state, console = _parts(request)
    status = await console.view.status()
    hidden = {
        r.alias.lower() for r in await console.view.records() if not state.visible(r, request)
    }
    mirrors = [m for m in status["mirrors"] if m["name"].lower() not in hidden]
    return _json({"daemon": status["daemon"], "mirrors": mirrors})


def _resource_reader(request: web.Request) -> Callable[[str], bool]:
    """Which stored names the request may see: resources say how the node
    reaches its sources and sinks, so each is shown only where the node's one decision lets the
    caller read its account's resources (as the resource protocol does); anonymous visitors are
    refused."""
    state, _ = _parts(request)
    if state.principal(request).account is None:
        raise web.HTTPForbidden(
            text="resources are shown to accounts' tokens and read and admin tokens only"
        )

    def readable(stored_name: str) -> bool:
        account, _ = split_name(stored_name)
        decision = state.decide_account(request, Action.READ, str(account or DEFAULT_ACCOUNT))
        return decision.allowed

    return readable


async def _resources(request: web.Request) -> web.Response:
    """Every resource: type, name, phase, generations and conditions (never a spec: secrets and
    infrastructure stay out of the page)."""
    readable = _resource_reader(request)
    workspace = request.app[STATE_KEY].workspace
    records = [r for r in await list_resources(workspace, Selector()) if readable(r.name)]
    return _json(
        {
            "resources": [
                {
                    "id": r.id,
                    "kind": kind_of(r.schema),
                    "name": r.name,
                    "phase": r.status.get("phase"),
                    "generation": r.generation,
                    "observedGeneration": r.status.get("observedGeneration"),
                    "conditions": {
                        key.rsplit("/", 1)[-1]: value
                        for key, value in sorted((r.status.get("conditions") or {}).items())
                    },
                    "updatedAt": r.updated_at.isoformat(),
                }
                for r in records
            ]
        }
    )


async def _flow_runs(request: web.Request) -> web.Response:
    readable = _resource_reader(request)
    query = HistoryQuery(request.query.get("flow") or None, _int(request, "limit", PAGE, MAX_PAGE))
    try:
        runs = await flow_runs(request.app[STATE_KEY].workspace, query)
    except ResourceNotFoundError as err:
        raise web.HTTPNotFound(text=str(err)) from None
    return _json({"runs": [run_document(r) for r in runs if readable(r.flow_name)]})


async def _webhook_deliveries(request: web.Request) -> web.Response:
    readable = _resource_reader(request)
    query = HistoryQuery(
        request.query.get("target") or None, _int(request, "limit", PAGE, MAX_PAGE)
    )
    try:
        deliveries = await webhook_deliveries(request.app[STATE_KEY].workspace, query)
    except ResourceNotFoundError as err:
        raise web.HTTPNotFound(text=str(err)) from None
    shown = [delivery_document(d) for d in deliveries if readable(d.target_name)]
    return _json({"deliveries": shown})


async def _node(request: web.Request) -> web.Response:
    state, console = _parts(request)
    return _json(await node_info(state, console.view, console.backend, request))


# --- queries and actions --------------------------------------------------------------------------


def _check_same_origin(request: web.Request) -> web.Response | None:
    """Refuses a ``POST`` a page of another site could have sent."""
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return _error(403, "cross-site request refused")
    origin = request.headers.get("Origin")
    if origin is not None and origin != str(request.url.origin()):
        return _error(403, f"request from origin {origin} refused")
    if request.content_type != "application/json":
        return _error(415, "the request body must be JSON (Content-Type: application/json)")
    return None


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        raise web.HTTPBadRequest(text="the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the request body must be a JSON object")
    return body


async def _sql(request: web.Request) -> web.Response:
    state, console = _parts(request)
    refused = _check_same_origin(request)
    if refused is not None:
        return refused
    if not state.signed_in(request):
        return _error(401, "the SQL box needs a bearer token (Authorization: Bearer …)")
    body = await _body(request)
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        return _error(400, "field query must be a non-empty string")
    proof = body.get("proof", False)
    if not isinstance(proof, bool):
        return _error(400, "field proof must be true or false")
    limit = 1000

    def visible(record: DatasetRecord) -> bool:
        return state.visible(record, request)

    answer = None
    try:
        if proof:
            columns, rows, truncated, ms, answer = await run_sql_with_proof(
                console.backend.node, query, limit, visible
            )
        else:
            columns, rows, truncated, ms = await run_sql(
                console.backend.node, query, limit, visible
            )
    except OdfError as err:
        return _error(400, str(err))
    result = {
        "columns": columns,
        "rows": rows,
        "truncated": truncated,
        "ms": ms,
        "engine": SQL_BOX_ENGINE,
    }
    if answer is not None:
        result["answer"] = answer
    return _json(result)


async def _provenance(request: web.Request) -> web.Response:
    """Why the row at ``offset`` exists (``depth`` levels, default to the roots); re-executes
    transforms like the SQL box runs queries, so it needs a read or admin token too."""
    from odfd.app.events import DiscardEvents
    from odfd.app.provenance import ProvenanceRequest, trace

    state, console = _parts(request)
    if not state.signed_in(request):
        return _error(401, "provenance needs a bearer token (Authorization: Bearer …)")
    record = await _record(request)
    if "offset" not in request.query:
        return _error(400, "query parameter offset is required")
    offset = _int(request, "offset", 0)
    depth = _int(request, "depth", 0) or None
    ask = ProvenanceRequest(
        str(record.id), offsets=(offset,), depth=depth, max_rows=CONSOLE_PROVENANCE_ROWS
    )
    try:
        result = await trace(console.backend.node, ask, DiscardEvents())
    except OdfError as err:
        return _error(400, str(err))
    return _json({"checkedByReExecution": True, "row": result.rows[0]})


async def _action(request: web.Request, run: Any) -> web.Response:
    state, console = _parts(request)
    refused = _check_same_origin(request)
    if refused is not None:
        return refused
    if not state.is_admin(request):
        return _error(401, "this action needs an admin token ([server] admin_tokens)")
    try:
        return _json(await run())
    except ActionUnavailableError as err:
        return _error(409, str(err))
    except OdfError as err:
        return _error(400, str(err))


async def _sync_now(request: web.Request) -> web.Response:
    _, console = _parts(request)
    name = request.match_info["name"]
    return await _action(request, lambda: console.backend.sync_now(name))


async def _audit_now(request: web.Request) -> web.Response:
    _, console = _parts(request)
    dataset = request.match_info["dataset"]

    async def run() -> dict[str, Any]:
        scope = (await _body(request)).get("scope", "integrity")
        await _record(request)
        return await console.backend.audit_now(dataset, str(scope))

    return await _action(request, run)
