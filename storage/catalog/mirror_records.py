"""The rows of the ``mirrors`` and ``sync_attempts`` tables as records, and the queries that read
them, shared by :class:`storage.catalog.mirrors.MirrorTable` and the CLI's synchronous
:mod:`storage.catalog.sync_reader`. Imports no aiosqlite and no asyncio (``odfd status`` without a
daemon starts without them)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Literal

from protocol.identity import DatasetId, Multihash
from storage.catalog.columns import from_text, hash_from_text

Outcome = Literal["unchanged", "updated", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class TargetState:
    """What the last push to one target achieved."""

    head: Multihash | None = None
    """Local head the target was last brought to."""
    remote: str | None = None
    """The URL it resolved to (``ipns://`` alone becomes ``ipns://<key id>``)."""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class MirrorRecord:
    name: str
    source: str
    targets: tuple[str, ...]
    interval: float
    paused: bool
    resource_id: str | None
    created_at: datetime
    updated_at: datetime
    next_run_at: datetime | None = None
    consecutive_failures: int = 0
    last_attempt_at: datetime | None = None
    last_success_at: datetime | None = None
    last_error: str | None = None
    source_head: Multihash | None = None
    source_sequence: int | None = None
    source_cid: str | None = None
    pinned_cid: str | None = None
    target_state: Mapping[str, TargetState] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class SyncAttempt:
    mirror: str
    source: str
    dataset_id: DatasetId | None
    started_at: datetime
    finished_at: datetime
    outcome: Outcome
    old_head: Multihash | None = None
    new_head: Multihash | None = None
    source_head: Multihash | None = None
    blocks: int = 0
    objects: int = 0
    bytes: int = 0
    pushes: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None
    id: int | None = None

    @property
    def duration(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()


def targets_of(text: str) -> Mapping[str, TargetState]:
    return MappingProxyType(
        {
            target: TargetState(hash_from_text(v.get("head")), v.get("remote"), v.get("error"))
            for target, v in json.loads(text).items()
        }
    )


MIRROR_COLUMNS = (
    "name, source, targets, interval_seconds, paused, resource_id, created_at, updated_at,"
    " next_run_at, consecutive_failures, last_attempt_at, last_success_at, last_error,"
    " source_head, source_sequence, source_cid, pinned_cid, target_state"
)


def mirror_record(row: Sequence[Any]) -> MirrorRecord:
    return MirrorRecord(
        name=row[0],
        source=row[1],
        targets=tuple(json.loads(row[2])),
        interval=row[3],
        paused=bool(row[4]),
        resource_id=row[5],
        created_at=from_text(row[6]),
        updated_at=from_text(row[7]),
        next_run_at=from_text(row[8]),
        consecutive_failures=row[9],
        last_attempt_at=from_text(row[10]),
        last_success_at=from_text(row[11]),
        last_error=row[12],
        source_head=hash_from_text(row[13]),
        source_sequence=row[14],
        source_cid=row[15],
        pinned_cid=row[16],
        target_state=targets_of(row[17]),
    )


ATTEMPT_COLUMNS = (
    "id, mirror, source, dataset_id, started_at, finished_at, outcome, old_head, new_head,"
    " source_head, blocks, objects, bytes, pushes, error"
)


def sync_attempt(row: Sequence[Any]) -> SyncAttempt:
    return SyncAttempt(
        id=row[0],
        mirror=row[1],
        source=row[2],
        dataset_id=None if row[3] is None else DatasetId.parse(row[3]),
        started_at=from_text(row[4]),
        finished_at=from_text(row[5]),
        outcome=row[6],
        old_head=hash_from_text(row[7]),
        new_head=hash_from_text(row[8]),
        source_head=hash_from_text(row[9]),
        blocks=row[10],
        objects=row[11],
        bytes=row[12],
        pushes=tuple(json.loads(row[13])),
        error=row[14],
    )


LIST_MIRRORS_QUERY = f"SELECT {MIRROR_COLUMNS} FROM mirrors ORDER BY name COLLATE NOCASE"
LATEST_ATTEMPTS_QUERY = (
    f"SELECT {ATTEMPT_COLUMNS} FROM sync_attempts"
    " WHERE id IN (SELECT max(id) FROM sync_attempts GROUP BY mirror)"
)
"""Each mirror's newest attempt."""


def latest_attempts(rows: Iterable[Sequence[Any]]) -> dict[str, SyncAttempt]:
    """Each mirror's newest attempt, by mirror name, from :data:`LATEST_ATTEMPTS_QUERY`'s rows."""
    return {attempt.mirror: attempt for attempt in map(sync_attempt, rows)}
