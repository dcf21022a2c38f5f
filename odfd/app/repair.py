"""``odfd repair``: rebuild the catalog from the dataset folders. It opens the node itself,
since the node it repairs may not open: an unreadable catalog is first moved aside."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odfd.app.node import open_node
from storage.layout import WorkspaceLayout
from storage.workspace import reset_catalog

if TYPE_CHECKING:
    from pathlib import Path

    from storage.workspace import RepairReport


async def set_aside_unreadable_catalog(root: Path | None) -> Path | None:
    """Where the catalog of the workspace at ``root`` (the default one for ``None``) was moved
    because it could not be read; ``None`` when it was fine (or there is no workspace)."""
    layout = WorkspaceLayout(root if root is not None else WorkspaceLayout.default_root())
    return await reset_catalog(layout) if layout.config_path.is_file() else None


async def repair(root: Path | None) -> RepairReport:
    """Registers every complete dataset folder in the catalog; the report names the datasets
    registered and the folders skipped, with the reason."""
    async with await open_node(root) as node:
        return await node.workspace.repair()
