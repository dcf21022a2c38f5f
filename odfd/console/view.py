"""The console's reading of the catalog: the dataset list and ``odfd status``'s document as
``odfd.app.catalog_snapshot`` keeps them (read again only when the catalog changed). What only a
running daemon knows (queues, the in-memory schedule, withheld datasets) is laid over the kept
document on every read."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from odfd.app.catalog_snapshot import CatalogSnapshot
from odfd.console.backend import NodeBackend
from storage.catalog import DatasetRecord


def _time(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


class CatalogView:
    def __init__(self, backend: NodeBackend) -> None:
        self.backend = backend
        self._snapshot = CatalogSnapshot(backend.workspace)

    async def _read(self) -> tuple[list[DatasetRecord], dict[str, Any]]:
        return await self._snapshot.read(self.backend.config.sync.freeze_after)

    async def records(self) -> list[DatasetRecord]:
        records, _ = await self._read()
        return records

    async def status(self) -> dict[str, Any]:
        """``build_status``'s document, with the daemon's live parts when one runs."""
        _, kept = await self._read()
        status = copy.copy(kept)
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
