"""The ``flow_runs`` table: each run of a flow, what fired it and how it ended."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
            f"SELECT {_COLUMNS} FROM flow_runs {where} ORDER BY run_id DESC LIMIT ?",
            (*args, limit),
        )
        return [_record(row) for row in rows]

    async def page(
        self, flow_ids: Sequence[str], states: Sequence[str], offset: int, limit: int
    ) -> tuple[builtins.list[FlowRunRecord], int]:
        """Runs of ``flow_ids`` in ``states``, newest first, ``limit`` from ``offset``; and how
        many there are in all (a page of a listing, counted in the same filter)."""
        if not flow_ids or not states:
            return [], 0
        where = (
            f"WHERE flow_id IN ({', '.join('?' * len(flow_ids))})"
            f" AND state IN ({', '.join('?' * len(states))})"
        )
        args = (*flow_ids, *states)
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM flow_runs {where} ORDER BY run_id DESC LIMIT ? OFFSET ?",
            (*args, limit, offset),
        )
        [(total,)] = await self._sql.fetchall(f"SELECT COUNT(*) FROM flow_runs {where}", args)
        return [_record(row) for row in rows], int(total)

    async def get(self, run_id: int) -> FlowRunRecord | None:
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM flow_runs WHERE run_id = ?", (run_id,)
        )
        return _record(rows[0]) if rows else None


_COLUMNS = "run_id, flow_id, flow_name, trigger, state, started_at, finished_at, error"


def _record(r: Sequence[Any]) -> FlowRunRecord:
    return FlowRunRecord(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        datetime.fromisoformat(r[5]),
        None if r[6] is None else datetime.fromisoformat(r[6]),
        r[7],
    )
