"""The ``mirrors`` and ``sync_attempts`` tables: which datasets the daemon keeps in sync with a
remote source, when each runs next, and how every attempt went.

The catalog is the source of truth for mirror configuration: the CLI edits it whether or not a
daemon runs, and a daemon (re)loads its schedule from it on start and on reload.
"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import aiosqlite

from protocol.identity import Multihash
from storage.catalog.catalog import Catalog
from storage.catalog.columns import hash_to_text, now_text, to_text
from storage.catalog.mirror_records import (
    ATTEMPT_COLUMNS,
    LATEST_ATTEMPTS_QUERY,
    LIST_MIRRORS_QUERY,
    MIRROR_COLUMNS,
    MirrorRecord,
    SyncAttempt,
    TargetState,
    latest_attempts,
    mirror_record,
    sync_attempt,
)
from storage.errors import StorageError


class MirrorExistsError(StorageError):
    """A mirror of that name is already configured."""


class MirrorNotFoundError(StorageError, LookupError):
    """No mirror of that name is configured."""


@dataclass(frozen=True, slots=True)
class AttemptBookkeeping:
    """How an attempt changes its mirror's row (written with the attempt, in one transaction)."""

    next_run_at: datetime
    consecutive_failures: int
    last_error: str | None
    source_head: Multihash | None
    source_sequence: int | None
    source_cid: str | None
    pinned_cid: str | None
    target_state: Mapping[str, TargetState]


def _targets_json(state: Mapping[str, TargetState]) -> str:
    return json.dumps(
        {
            target: {"head": hash_to_text(s.head), "remote": s.remote, "error": s.error}
            for target, s in state.items()
        },
        sort_keys=True,
    )


_ROWS_PER_TURN = 500


class MirrorTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def add(
        self,
        name: str,
        source: str,
        targets: Sequence[str],
        interval: float,
        *,
        resource_id: str | None = None,
    ) -> MirrorRecord:
        now = now_text()
        async with self._sql.transaction():
            try:
                await self._sql.execute(
                    "INSERT INTO mirrors (name, source, targets, interval_seconds, resource_id, created_at,"
                    " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, source, json.dumps(list(targets)), interval, resource_id, now, now),
                )
            except aiosqlite.IntegrityError:
                raise MirrorExistsError(
                    f"a mirror named {name} already exists (see `odfd mirror list`)"
                ) from None
            return await self.require(name)

    async def update(
        self,
        name: str,
        *,
        source: str,
        targets: Sequence[str],
        interval: float,
        resource_id: str | None,
    ) -> MirrorRecord:
        """Change what a mirror syncs; a new source forgets what was known about the old one."""
        async with self._sql.transaction():
            current = await self.require(name)
            same_source = current.source == source
            await self._sql.execute(
                "UPDATE mirrors SET source = ?, targets = ?, interval_seconds = ?, resource_id = ?, updated_at = ?,"
                " source_head = CASE WHEN ? THEN source_head END,"
                " source_sequence = CASE WHEN ? THEN source_sequence END, source_cid = CASE WHEN ? THEN source_cid END,"
                " consecutive_failures = CASE WHEN ? THEN consecutive_failures ELSE 0 END WHERE name = ?",
                (
                    source,
                    json.dumps(list(targets)),
                    interval,
                    resource_id,
                    now_text(),
                    *[same_source] * 4,
                    name,
                ),
            )
            return await self.require(name)

    async def get(self, name: str) -> MirrorRecord | None:
        row = await self._sql.fetchone(
            f"SELECT {MIRROR_COLUMNS} FROM mirrors WHERE name = ?", (name,)
        )
        return None if row is None else mirror_record(row)

    async def require(self, name: str) -> MirrorRecord:
        record = await self.get(name)
        if record is None:
            raise MirrorNotFoundError(f"no mirror named {name} (see `odfd mirror list`)")
        return record

    async def list(self) -> list[MirrorRecord]:
        """Every mirror; parsed a few hundred rows per turn of the event loop, so a node with
        10,000 mirrors keeps serving while it lists them (a daemon's reload)."""
        rows = await self._sql.fetchall(LIST_MIRRORS_QUERY)
        records: list[MirrorRecord] = []
        for start in range(0, len(rows), _ROWS_PER_TURN):
            if start:
                await asyncio.sleep(0)
            records.extend(mirror_record(row) for row in rows[start : start + _ROWS_PER_TURN])
        return records

    async def remove(self, name: str) -> MirrorRecord:
        async with self._sql.transaction():
            record = await self.require(name)
            await self._sql.execute("DELETE FROM mirrors WHERE name = ?", (name,))
        return record

    async def follow(self, name: str, new_name: str | None) -> MirrorRecord | None:
        """The mirror of the dataset ``name`` renamed to ``new_name`` (its schedule, source state,
        attempt history and freeze bound with it), or removed (None: the dataset was deleted; its
        history stays); None when the dataset was not mirrored. Run it in the transaction that
        renames or deletes the dataset, so the daemon never syncs into the old alias."""
        record = await self.get(name)
        if record is None:
            return None
        if new_name is None:
            await self._sql.execute("DELETE FROM mirrors WHERE name = ?", (name,))
            await self._sql.execute("DELETE FROM mirror_freeze_bounds WHERE mirror = ?", (name,))
            return record
        try:
            await self._sql.execute(
                "UPDATE mirrors SET name = ?, updated_at = ? WHERE name = ?",
                (new_name, now_text(), name),
            )
        except aiosqlite.IntegrityError:
            raise MirrorExistsError(
                f"dataset {name} is mirrored and a mirror named {new_name} already exists (see "
                "`odfd mirror list`); remove it or choose another name"
            ) from None
        for table in ("sync_attempts", "mirror_freeze_bounds"):
            await self._sql.execute(
                f"UPDATE {table} SET mirror = ? WHERE mirror = ? COLLATE NOCASE", (new_name, name)
            )
        return record

    async def set_paused(self, name: str, paused: bool) -> MirrorRecord:
        async with self._sql.transaction():
            await self.require(name)
            await self._sql.execute(
                "UPDATE mirrors SET paused = ?, updated_at = ? WHERE name = ?",
                (paused, now_text(), name),
            )
            return await self.require(name)

    # --- attempts -------------------------------------------------------------------------------

    async def finish_attempt(self, attempt: SyncAttempt, book: AttemptBookkeeping) -> int:
        """Record ``attempt`` and move its mirror's schedule, atomically."""
        succeeded = attempt.outcome in ("unchanged", "updated")
        async with self._sql.transaction():
            inserted = await self._sql.execute(
                "INSERT INTO sync_attempts (mirror, source, dataset_id, started_at, finished_at, duration_seconds,"
                " outcome, old_head, new_head, source_head, blocks, objects, bytes, pushes, error)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    attempt.mirror,
                    attempt.source,
                    None if attempt.dataset_id is None else str(attempt.dataset_id),
                    to_text(attempt.started_at),
                    to_text(attempt.finished_at),
                    attempt.duration,
                    attempt.outcome,
                    hash_to_text(attempt.old_head),
                    hash_to_text(attempt.new_head),
                    hash_to_text(attempt.source_head),
                    attempt.blocks,
                    attempt.objects,
                    attempt.bytes,
                    json.dumps(list(attempt.pushes)),
                    attempt.error,
                ),
            )
            await self._sql.execute(
                "UPDATE mirrors SET next_run_at = ?, consecutive_failures = ?, last_attempt_at = ?,"
                " last_success_at = CASE WHEN ? THEN ? ELSE last_success_at END, last_error = ?,"
                " source_head = ?, source_sequence = ?, source_cid = ?, pinned_cid = ?, target_state = ?"
                " WHERE name = ?",
                (
                    to_text(book.next_run_at),
                    book.consecutive_failures,
                    to_text(attempt.finished_at),
                    succeeded,
                    to_text(attempt.finished_at),
                    book.last_error,
                    hash_to_text(book.source_head),
                    book.source_sequence,
                    book.source_cid,
                    book.pinned_cid,
                    _targets_json(book.target_state),
                    attempt.mirror,
                ),
            )
        assert inserted.lastrowid is not None  # an INSERT sets it
        return inserted.lastrowid

    async def attempts(
        self, name: str | None = None, *, limit: int = 20
    ) -> builtins.list[SyncAttempt]:
        """Newest first; of one mirror, or of all."""
        where, args = ("WHERE mirror = ?", (name, limit)) if name is not None else ("", (limit,))
        rows = await self._sql.fetchall(
            f"SELECT {ATTEMPT_COLUMNS} FROM sync_attempts {where} ORDER BY id DESC LIMIT ?", args
        )
        return [sync_attempt(row) for row in rows]

    async def latest_attempts(self) -> dict[str, SyncAttempt]:
        """Each mirror's newest attempt, by mirror name."""
        return latest_attempts(await self._sql.fetchall(LATEST_ATTEMPTS_QUERY))

    async def prune_attempts(self, before: datetime) -> int:
        changes = await self._sql.execute(
            "DELETE FROM sync_attempts WHERE started_at < ?", (to_text(before),)
        )
        return changes.rowcount
