"""The ``flow_runs`` table: each run of a flow, what fired it and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from storage.catalog.catalog import Catalog


@dataclass(frozen=True, slots=True)
class FlowRunRecord:
    run_id: int
    flow_id: str
    flow_name: str
    trigger: str
    state: str
    """``running``, ``succeeded`` or ``failed``."""
    started_at: datetime
    finished_at: datetime | None
    error: str | None


class FlowRunTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def start(self, flow_id: str, flow_name: str, trigger: str, at: datetime) -> int:
        changes = await self._sql.execute(
            "INSERT INTO flow_runs (flow_id, flow_name, trigger, state, started_at)"
            " VALUES (?, ?, ?, 'running', ?)",
            (flow_id, flow_name, trigger, at.isoformat()),
        )
        assert changes.lastrowid is not None
        return changes.lastrowid

    async def finish(self, run_id: int, state: str, at: datetime, error: str | None) -> None:
        await self._sql.execute(
            "UPDATE flow_runs SET state = ?, finished_at = ?, error = ? WHERE run_id = ?",
            (state, at.isoformat(), error, run_id),
        )

    async def list(self, flow_id: str | None = None, limit: int = 100) -> list[FlowRunRecord]:
        where, args = ("WHERE flow_id = ?", [flow_id]) if flow_id else ("", [])
        rows = await self._sql.fetchall(
            "SELECT run_id, flow_id, flow_name, trigger, state, started_at, finished_at, error"
            f" FROM flow_runs {where} ORDER BY run_id DESC LIMIT ?",
            (*args, limit),
        )
        return [
            FlowRunRecord(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                datetime.fromisoformat(r[5]),
                None if r[6] is None else datetime.fromisoformat(r[6]),
                r[7],
            )
            for r in rows
        ]
