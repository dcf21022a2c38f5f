"""What a workspace served from the CLI (``odfd serve``, ``odfd ui`` without a daemon) mounts
beside the transfer protocols: the console, the query, ingest and upload APIs and the resource
protocol. The daemon mounts more (webhooks, sources) from its own state."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.server.app import Mount


def workspace_mounts(node: Node) -> list[Mount]:
    from odfd.app.resource_service import reconcile_here
    from odfd.console.api import console_mount
    from odfd.console.backend import WorkspaceBackend
    from odfd.server.ingest_api import IngestApi
    from odfd.server.query_api import query_api_mount
    from odfd.server.resource_api import ResourceApi
    from odfd.server.upload_api import UploadApi

    return [
        console_mount(WorkspaceBackend(node)),
        query_api_mount(node),
        IngestApi(lambda: node),
        UploadApi(lambda: node),
        ResourceApi(lambda: node, reconcile_here(node)),
    ]
