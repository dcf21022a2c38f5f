"""The daemon's local admin API: HTTP over a Unix socket in the workspace (mode 0600; its peer
must be the node's own user or carry a node admin's token: ``odfd.daemon.admin_auth``), used
by ``odfd mirror``, ``apply``, ``status`` and ``daemon reload|stop|audit``. ``AdminApi`` serves it for a running daemon;
``odfd.daemon.admin_client`` talks to it.

``GET /status`` (``odfd.app.status``), ``GET /metrics``, ``POST /reload`` (config and mirror
schedule), ``POST /reconcile`` (resources, answers with each one's phase), ``POST
/mirrors/{name}/sync`` (now), ``POST /audit/{dataset}?scope=full|integrity``, ``POST /stop``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from aiohttp import web

from odfd.app.node import Node
from odfd.app.status import build_status
from odfd.config import NodeConfig
from odfd.daemon.admin_auth import AdminSocketAuth
from odfd.daemon.audits import Auditor
from odfd.daemon.commands import CommandRunner
from odfd.daemon.jobs import JobRunner
from odfd.daemon.metrics import CONTENT_TYPE, DaemonMetrics
from odfd.errors import OdfdError
from protocol.errors import OdfError
from protocol.identity import DatasetId, DatasetRef
from storage.catalog.mirrors import MirrorTable
from storage.workspace import Workspace


class AdminRequestError(OdfdError):
    """An admin request asks for something the daemon cannot do as asked."""


Handler = Callable[[web.Request], Awaitable[Any]]


def json_handler(action: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        try:
            result = await action(request)
        except OdfError as err:
            return web.json_response({"error": str(err)}, status=400)
        return web.json_response(result, dumps=lambda v: json.dumps(v, default=str))

    return handle


class AdminTarget(Protocol):
    """What the admin API reads and drives of a running daemon (``odfd.daemon.service.Daemon``)."""

    workspace: Workspace
    node: Node
    config: NodeConfig
    metrics: DaemonMetrics
    syncs: JobRunner
    mirrors: MirrorTable
    auditor: Auditor
    withheld: set[DatasetId]
    commands: CommandRunner

    def runtime(self) -> dict[str, Any]: ...

    async def reload(self) -> dict[str, Any]: ...

    async def reconcile_resources(self) -> list[dict[str, Any]]: ...

    def stop(self) -> None: ...


class AdminApi:
    """The admin API's handlers, served on the daemon's Unix socket by ``start``."""

    def __init__(self, daemon: AdminTarget) -> None:
        self.daemon = daemon

    async def start(self, path: Path) -> web.AppRunner:
        """Listen on ``path`` (mode 0600); the caller cleans the returned runner up."""
        daemon = self.daemon
        app = web.Application(
            middlewares=[
                AdminSocketAuth(lambda: (daemon.workspace, daemon.config.server)).middleware
            ]
        )
        routes = [
            ("GET", "/ping", json_handler(self.ping)),
            ("GET", "/status", json_handler(self.status)),
            ("GET", "/metrics", self.metrics),
            ("POST", "/reload", json_handler(self.reload)),
            ("POST", "/reconcile", json_handler(self.reconcile)),
            ("POST", "/mirrors/{name}/sync", json_handler(self.sync_now)),
            ("POST", "/audit/{dataset}", json_handler(self.audit_now)),
            ("POST", "/stop", json_handler(self.stop)),
            *self.daemon.commands.routes(),
        ]
        for method, route, handler in routes:
            app.router.add_route(method, route, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await asyncio.to_thread(_clear_socket_path, path)
            old_mask = os.umask(0o177)
            try:
                await web.UnixSite(runner, str(path)).start()
            finally:
                os.umask(old_mask)
            await asyncio.to_thread(os.chmod, path, 0o600)
        except BaseException:
            await runner.cleanup()
            raise
        return runner

    async def ping(self, request: web.Request) -> dict[str, Any]:
        return {"pid": os.getpid(), **self.daemon.commands.ping()}

    async def status(self, request: web.Request) -> dict[str, Any]:
        daemon = self.daemon
        next_runs = {str(k): v for k, v in daemon.syncs.scheduled().items()}
        withheld = {str(d) for d in daemon.withheld}
        return await build_status(
            daemon.workspace,
            daemon.runtime(),
            next_runs,
            withheld,
            freeze_after=daemon.config.sync.freeze_after,
        )

    async def metrics(self, request: web.Request) -> web.Response:
        """Also served at ``/metrics`` of the node's HTTP server when ``[metrics] enabled``."""
        self.daemon.metrics.queue_depth.set(self.daemon.syncs.queued)
        body = self.daemon.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def reload(self, request: web.Request) -> dict[str, Any]:
        return await self.daemon.reload()

    async def reconcile(self, request: web.Request) -> dict[str, Any]:
        return {"resources": await self.daemon.reconcile_resources()}

    async def sync_now(self, request: web.Request) -> dict[str, Any]:
        mirror = await self.daemon.mirrors.require(request.match_info["name"])
        self.daemon.syncs.run_now(mirror.name)
        return {"queued": mirror.name}

    async def audit_now(self, request: web.Request) -> dict[str, Any]:
        ref = DatasetRef.parse(request.match_info["dataset"])
        record = await self.daemon.workspace.resolve(ref)
        scope: Literal["full", "integrity"]
        match request.query.get("scope", "full"):
            case "full":
                scope = "full"
            case "integrity":
                scope = "integrity"
            case other:
                raise AdminRequestError(f"scope must be full or integrity, not {other!r}")
        self.daemon.auditor.request(record.id, scope, "manual")
        return {"queued": record.alias, "scope": scope}

    async def stop(self, request: web.Request) -> dict[str, Any]:
        # After the answer has gone out.
        asyncio.get_running_loop().call_later(0.1, self.daemon.stop)
        return {"stopping": True}


def _clear_socket_path(path: Path) -> None:
    """Removes a socket left by a killed daemon (the workspace lock says none runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
