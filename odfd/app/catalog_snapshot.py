"""The catalog's dataset list and ``odfd status``'s document, read again only when the catalog
changed (``Catalog.change_marker``): pages of a node with thousands of datasets (the web
console's) cost one small query until something happens."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odfd.app.status import build_status

if TYPE_CHECKING:
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


class CatalogSnapshot:
    """The datasets and status of ``workspace`` as of its catalog's last change."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._marker: tuple[int, int] | None = None
        self._records: list[DatasetRecord] = []
        self._status: dict[str, Any] = {}

    async def read(self, freeze_after: float) -> tuple[list[DatasetRecord], dict[str, Any]]:
        """The datasets and ``build_status``'s document (``freeze_after``: ``[sync]``'s), both
        kept until the catalog changes: callers copy the document before changing it."""
        marker = await self.workspace.catalog.change_marker()
        if marker != self._marker:
            # Read after taking the marker: a change made meanwhile shows in the next marker.
            self._records = await self.workspace.list_datasets()
            self._status = await build_status(self.workspace, freeze_after=freeze_after)
            self._marker = marker
        return self._records, self._status
