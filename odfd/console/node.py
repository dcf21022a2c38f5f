"""The console's node page: what is served, the daemon's queues, the IPFS node, the engines and
the daemon's metrics (parsed from its Prometheus exposition)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from odfd.app.engine_status import spark_session_running
from odfd.app.ipfs_status import ipfs_status
from odfd.console.backend import NodeBackend
from odfd.console.view import CatalogView
from odfd.server.state import ServerState


async def node_info(
    state: ServerState, view: CatalogView, backend: NodeBackend, request: web.Request
) -> dict[str, Any]:
    status = await view.status()
    visible = [r for r in await view.records() if state.visible(r, request)]
    config = backend.config
    served = [r.alias for r in visible if r.id not in state.withheld]
    return {
        "workspace": str(state.workspace.root),
        "daemon": status["daemon"],
        "datasets": len(visible),
        "served": sorted(served, key=str.lower),
        "withheld": sorted((r.alias for r in visible if r.id in state.withheld), key=str.lower),
        "mirrors": len(status["mirrors"]),
        "ipfs": await _ipfs(config.ipfs.settings().api),
        "engines": [
            {
                "name": "spark",
                "version": _version("pyspark"),
                "master": config.spark.master,
                "running": spark_session_running(),
            }
        ],
        "metrics": _metrics(backend.metrics()),
        "tokens": {
            "read": state.signed_in(request),
            "admin": state.is_admin(request),
        },
    }


async def _ipfs(api: str) -> dict[str, Any]:
    """Whether the configured IPFS node answers (``odfd.app.ipfs_status``)."""
    status = await ipfs_status(api)
    if status.error is not None:
        return {"api": api, "online": False, "error": status.error}
    return {
        "api": api,
        "online": True,
        "peerId": status.peer_id,
        "agent": status.agent,
        "addresses": list(status.addresses),
    }


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _metrics(text: str | None) -> list[dict[str, Any]]:
    if text is None:
        return []
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                continue
            out.append(
                {
                    "name": sample.name,
                    "labels": dict(sample.labels),
                    "value": sample.value,
                    "help": family.documentation,
                }
            )
    return out
