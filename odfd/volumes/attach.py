"""Giving a workspace the volumes its datasets are placed on.

A workspace without volumes keeps its own storage untouched. Once a ``PersistentVolume`` exists
(or a dataset was placed on one), its storage becomes a ``PlacedStorage`` over the node's own
storage and every volume this node can use; a volume it cannot use (credentials missing, kind
unsupported) is left out, and its datasets say so when opened (``VolumeUnavailableError``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odfd.app.resource_types import PERSISTENT_VOLUME
from odfd.volumes.errors import VolumeError
from storage.catalog.resources import ResourceRecord, ResourceTable
from storage.placed_storage import PLACEMENTS_FILE, PlacedStorage
from storage.workspace import Workspace

if TYPE_CHECKING:
    from odfd.app.node_secrets import NodeSecrets

log = logging.getLogger(__name__)


def placed(workspace: Workspace) -> PlacedStorage:
    """The workspace's storage as a ``PlacedStorage`` (wrapping its own the first time)."""
    if not isinstance(workspace.storage, PlacedStorage):
        workspace.storage = PlacedStorage(workspace.root, workspace.storage, {})
    return workspace.storage


async def attach(workspace: Workspace, record: ResourceRecord, secrets: NodeSecrets) -> None:
    """Make the volume usable by the workspace now (raises ``VolumeError`` / ``ValueRefError``
    saying why it is not)."""
    from odfd.volumes.spec import volume_storage  # the S3 client only where volumes are

    storage = await volume_storage(workspace, record, secrets)
    await storage.check()
    placed(workspace).add_volume(record.id, storage)


async def attach_volumes(workspace: Workspace) -> None:
    """At open: every usable volume (read with the node's secrets), if the workspace has any
    volume or placed dataset. Only then are the secrets' modules loaded (JOSE and cryptography
    cost a command that opens a node ~0.1 s)."""
    records = await ResourceTable(workspace.catalog).list(PERSISTENT_VOLUME.schema)
    if not records and not (workspace.root / PLACEMENTS_FILE).exists():
        return
    from odfd.app.node_secrets import NodeSecrets
    from odfd.app.value_refs import ValueRefError
    from odfd.volumes.spec import volume_storage

    secrets = NodeSecrets(workspace.keys)
    storage = placed(workspace)
    for record in records:
        try:
            storage.add_volume(record.id, await volume_storage(workspace, record, secrets))
        except (VolumeError, ValueRefError) as err:
            log.warning("volume not available", extra={"volume": record.name, "error": str(err)})
