"""The node's flows put together: the runner over the catalog's resources and flow runs, doing
its tasks on the node (webhook calls delivered and recorded, ``Source`` ingests fed from
``buffers``), the daemon's to tick and to tell of head moves.

Put together here, once, so that the daemon names no catalog table of the flows' own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odfd.flows.runner import FlowRunner
from odfd.flows.tasks import NodeTasks, WorkspaceTargets
from odfd.webhooks.delivery import WebhookDeliverer
from storage.catalog.flow_runs import FlowRunTable
from storage.catalog.resources import ResourceTable
from storage.catalog.webhook_deliveries import WebhookDeliveryTable

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.sources.buffers import SourceBuffers
    from odfd.sources.ingest import Moved


def flow_runner(node: Node, buffers: SourceBuffers, *, moved: Moved) -> FlowRunner:
    """The runner of ``node``'s flows; ``moved`` hears of each head an ingest task moved."""
    catalog = node.workspace.catalog
    resources = ResourceTable(catalog)
    return FlowRunner(
        resources,
        FlowRunTable(catalog),
        NodeTasks(
            node,
            WebhookDeliverer(WebhookDeliveryTable(catalog), resources),
            buffers,
            moved=moved,
        ),
        WorkspaceTargets(node),
        sources=buffers,
    )
