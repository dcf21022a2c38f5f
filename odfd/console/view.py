"""The console's cached reading of the catalog: the dataset list and ``odfd status``'s document
are read again only when the catalog changed (``Catalog.change_marker``), so pages of a node with
thousands of datasets cost one small query until something happens. What only a running daemon
knows (queues, the in-memory schedule, withheld datasets) is laid over the cached document on
every read."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from odfd.app.status import build_status
from odfd.console.backend import NodeBackend
from storage.catalog import DatasetRecord


def _time(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class CatalogView:
    def __init__(self, backend: NodeBackend) -> None:
        self.backend = backend
        self.workspace = backend.workspace
        self._marker: tuple[int, int] | None = None
        self._records: list[DatasetRecord] = []
        self._status: dict[str, Any] = {}

    async def _refresh(self) -> None:
        marker = await self.workspace.catalog.change_marker()
        if marker == self._marker:
            return
        # Read after taking the marker: a change made meanwhile shows in the next marker.
        self._records = await self.workspace.list_datasets()
        self._status = await build_status(
            self.workspace, freeze_after=self.backend.config.sync.freeze_after
        )
        self._marker = marker

    async def records(self) -> list[DatasetRecord]:
        await self._refresh()
        return self._records

    async def status(self) -> dict[str, Any]:
        """``build_status``'s document, with the daemon's live parts when one runs."""
        await self._refresh()
        status = copy.copy(self._status)
        runtime = self.backend.runtime()
        status["daemon"] = runtime if runtime is not None else {"running": False}
        withheld, next_runs = self.backend.withheld(), self.backend.next_runs()
        if withheld:
            status["datasets"] = [
                {**d, "withheld": d["id"] in withheld} for d in status["datasets"]
            ]
        if next_runs:
            status["mirrors"] = [
                {**m, "nextRunAt": _time(next_runs[m["name"]])}
                if m["name"] in next_runs and not m["paused"]
                else m
                for m in status["mirrors"]
            ]
        return status
