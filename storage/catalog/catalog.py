"""The catalog: what datasets the node holds, where their remote copies are, how syncs went.

It is an index for fast listing and lookup by alias, never the source of truth: the dataset
folders are (``Workspace.repair`` rebuilds ``datasets`` and ``remote_aliases`` from them).
One connection per ``Catalog``; aiosqlite runs it on its own thread. The connection is in
autocommit mode and multi-statement changes use explicit ``BEGIN IMMEDIATE`` transactions, so
several processes (CLI and daemon) can share the file under WAL; within a process every
statement goes through ``SharedConnection``, so no task's statement lands in another task's
transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import aiosqlite

from protocol.identity import DatasetId, Multihash
from protocol.model import DatasetKind
from storage.catalog.columns import from_text, hash_from_text, hash_to_text, now_text, to_text
from storage.catalog.migrations import migrate
from storage.catalog.records import (
    DATASET_COLUMNS,
    KIND_TO_TEXT,
    DatasetRecord,
    dataset_by_alias_query,
    dataset_by_id_query,
    dataset_record,
    list_datasets_query,
)
from storage.catalog.shared import SharedConnection
from storage.errors import DatasetExistsError, DatasetNotFoundError

RemoteAliasKind = Literal["pull", "push"]
Direction = Literal["pull", "push"]


@dataclass(frozen=True, slots=True)
class SyncState:
    dataset_id: DatasetId
    remote: str
    last_remote_head: Multihash | None
    last_remote_seen_at: datetime | None
    last_synced_local_head: Multihash | None
    last_synced_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Transfer:
    id: int
    dataset_id: DatasetId
    remote: str
    direction: Direction
    base_head: Multihash | None
    target_head: Multihash
    objects_total: int | None
    objects_done: int
    bytes_done: int
    started_at: datetime
    updated_at: datetime


class Catalog:
    """Async access to ``catalog.sqlite``; use ``await Catalog.open(path)`` or ``async with``.

    Tasks of one process may share it: modules owning later tables run their statements through
    ``catalog.sql`` (never on ``connection``), so none joins another task's open transaction."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self.sql = SharedConnection(db)
        self.path = path

    @classmethod
    async def open(cls, path: Path) -> Catalog:
        db = await aiosqlite.connect(path, isolation_level=None)
        try:
            await db.execute("PRAGMA busy_timeout = 10000")
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA synchronous = NORMAL")
            await db.execute("PRAGMA foreign_keys = ON")
            await migrate(db)
        except BaseException:
            await db.close()
            raise
        return cls(db, path)

    async def close(self) -> None:
        await self.sql.close()

    async def __aenter__(self) -> Catalog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connection(self) -> aiosqlite.Connection:
        """The raw connection, for connection-level checks (``PRAGMA``); statements on it bypass
        ``sql``'s ordering, so only run them inside ``transaction()``."""
        return self.sql.raw

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One transaction at a time on this connection: tasks of one process (the daemon's
        concurrent syncs and audits) share it, and other tasks' statements wait until it ends.
        Nested in a transaction of the same task, it is a savepoint."""
        async with self.sql.transaction():
            yield self.sql.raw

    # --- datasets -------------------------------------------------------------------------------

    async def add_dataset(
        self,
        id: DatasetId,
        alias: str,
        kind: DatasetKind,
        head: Multihash | None,
        head_sequence: int | None,
    ) -> DatasetRecord:
        now = now_text()
        async with self.sql.transaction():
            try:
                await self.sql.execute(
                    f"INSERT INTO datasets ({DATASET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        str(id),
                        alias,
                        KIND_TO_TEXT[kind],
                        hash_to_text(head),
                        head_sequence,
                        now,
                        now,
                    ),
                )
            except aiosqlite.IntegrityError:
                raise DatasetExistsError(
                    f"catalog already has a dataset with id {id} or alias {alias!r}"
                ) from None
            record = await self.get_dataset(id)
        assert record is not None  # inserted in the same transaction
        return record

    async def get_dataset(self, id: DatasetId) -> DatasetRecord | None:
        row = await self.sql.fetchone(*dataset_by_id_query(id))
        return None if row is None else dataset_record(row)

    async def find_by_alias(self, alias: str) -> DatasetRecord | None:
        row = await self.sql.fetchone(*dataset_by_alias_query(alias))
        return None if row is None else dataset_record(row)

    async def change_marker(self) -> tuple[int, int]:
        """Differs whenever anything in the catalog may have changed since it was last read: rows
        changed through this connection (SQLite's ``total_changes()``) and commits by other
        processes (``PRAGMA data_version``). Readers cache what they derive from the catalog by it."""
        row = await self.sql.fetchone(  # one round trip: servers ask before every query
            "SELECT total_changes(), data_version FROM pragma_data_version"
        )
        assert row is not None  # always one row
        return int(row[0]), int(row[1])

    async def list_datasets(self, kind: DatasetKind | None = None) -> list[DatasetRecord]:
        """Every dataset, or those of ``kind`` (a node mirroring thousands of root datasets asks
        for its few derivatives without reading every row)."""
        rows = await self.sql.fetchall(*list_datasets_query(kind))
        return [dataset_record(row) for row in rows]

    async def count_datasets(self) -> int:
        row = await self.sql.fetchone("SELECT count(*) FROM datasets")
        assert row is not None  # count(*) always answers one row
        return int(row[0])

    async def update_head(self, id: DatasetId, head: Multihash, head_sequence: int) -> None:
        changes = await self.sql.execute(
            "UPDATE datasets SET head = ?, head_sequence = ?, updated_at = ? WHERE id = ?",
            (hash_to_text(head), head_sequence, now_text(), str(id)),
        )
        if changes.rowcount == 0:
            raise DatasetNotFoundError(f"catalog has no dataset {id}")

    async def rename_dataset(self, id: DatasetId, alias: str) -> None:
        try:
            changes = await self.sql.execute(
                "UPDATE datasets SET alias = ?, updated_at = ? WHERE id = ?",
                (alias, now_text(), str(id)),
            )
        except aiosqlite.IntegrityError:
            raise DatasetExistsError(
                f"catalog already has a dataset with alias {alias!r}"
            ) from None
        if changes.rowcount == 0:
            raise DatasetNotFoundError(f"catalog has no dataset {id}")

    async def remove_dataset(self, id: DatasetId) -> None:
        await self.sql.execute("DELETE FROM datasets WHERE id = ?", (str(id),))

    async def replace_datasets(
        self, records: Iterable[tuple[DatasetRecord, dict[RemoteAliasKind, list[str]]]]
    ) -> None:
        """Make ``datasets`` and ``remote_aliases`` exactly ``records`` in one transaction
        (repair); sync state and transfers of datasets still present are kept."""
        records = list(records)
        async with self.sql.transaction():
            keep = [str(r.id) for r, _ in records]
            await self.sql.execute(
                f"DELETE FROM datasets WHERE id NOT IN ({','.join('?' * len(keep))})", keep
            )
            # Aliases may move between datasets: clear them first so UNIQUE holds at each step.
            await self.sql.execute("UPDATE datasets SET alias = id")
            for record, aliases in records:
                await self.sql.execute(
                    f"INSERT INTO datasets ({DATASET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET alias = excluded.alias, kind = excluded.kind,"
                    " head = excluded.head, head_sequence = excluded.head_sequence,"
                    " updated_at = excluded.updated_at",
                    (
                        str(record.id),
                        record.alias,
                        KIND_TO_TEXT[record.kind],
                        hash_to_text(record.head),
                        record.head_sequence,
                        to_text(record.created_at),
                        to_text(record.updated_at),
                    ),
                )
                await self.sql.execute(
                    "DELETE FROM remote_aliases WHERE dataset_id = ?", (str(record.id),)
                )
                for kind, refs in aliases.items():
                    await self.sql.executemany(
                        "INSERT INTO remote_aliases (dataset_id, kind, remote_ref) VALUES (?, ?, ?)",
                        [(str(record.id), kind, ref) for ref in refs],
                    )

    # --- remotes --------------------------------------------------------------------------------

    async def add_remote(self, name: str, url: str) -> None:
        try:
            await self.sql.execute(
                "INSERT INTO remotes (name, url, created_at) VALUES (?, ?, ?)",
                (name, url, now_text()),
            )
        except aiosqlite.IntegrityError:
            raise DatasetExistsError(f"remote {name!r} already exists") from None

    async def get_remote(self, name: str) -> str | None:
        row = await self.sql.fetchone("SELECT url FROM remotes WHERE name = ?", (name,))
        return None if row is None else row[0]

    async def list_remotes(self) -> list[tuple[str, str]]:
        return [
            (row[0], row[1])
            for row in await self.sql.fetchall("SELECT name, url FROM remotes ORDER BY name")
        ]

    async def remove_remote(self, name: str) -> bool:
        changes = await self.sql.execute("DELETE FROM remotes WHERE name = ?", (name,))
        return changes.rowcount > 0

    # --- remote aliases -------------------------------------------------------------------------

    async def set_remote_aliases(
        self, dataset_id: DatasetId, kind: RemoteAliasKind, refs: Iterable[str]
    ) -> None:
        async with self.sql.transaction():
            await self.sql.execute(
                "DELETE FROM remote_aliases WHERE dataset_id = ? AND kind = ?",
                (str(dataset_id), kind),
            )
            await self.sql.executemany(
                "INSERT INTO remote_aliases (dataset_id, kind, remote_ref) VALUES (?, ?, ?)",
                [(str(dataset_id), kind, ref) for ref in dict.fromkeys(refs)],
            )

    async def remote_aliases(self, dataset_id: DatasetId, kind: RemoteAliasKind) -> list[str]:
        rows = await self.sql.fetchall(
            "SELECT remote_ref FROM remote_aliases WHERE dataset_id = ? AND kind = ? ORDER BY remote_ref",
            (str(dataset_id), kind),
        )
        return [row[0] for row in rows]

    # --- sync state -----------------------------------------------------------------------------

    async def sync_states(self, dataset_id: DatasetId | None = None) -> list[SyncState]:
        """What the node last knew of each remote copy of ``dataset_id`` (``None``: of every
        dataset), by remote URL: ``odfd repo alias list`` shows it beside the remotes."""
        where, parameters = (
            ("", ()) if dataset_id is None else (" WHERE dataset_id = ?", (str(dataset_id),))
        )
        rows = await self.sql.fetchall(
            "SELECT dataset_id, remote, last_remote_head, last_remote_seen_at,"
            " last_synced_local_head, last_synced_at, updated_at FROM sync_state"
            f"{where} ORDER BY dataset_id, remote",
            parameters,
        )
        return [
            SyncState(
                DatasetId.parse(row[0]),
                row[1],
                hash_from_text(row[2]),
                from_text(row[3]),
                hash_from_text(row[4]),
                from_text(row[5]),
                from_text(row[6]),
            )
            for row in rows
        ]

    async def record_synced(self, dataset_id: DatasetId, remote: str, head: Multihash) -> None:
        """Both sides are at ``head`` now."""
        now = now_text()
        await self.sql.execute(
            "INSERT INTO sync_state (dataset_id, remote, last_remote_head, last_remote_seen_at,"
            " last_synced_local_head, last_synced_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (dataset_id, remote) DO UPDATE SET"
            " last_remote_head = excluded.last_remote_head,"
            " last_remote_seen_at = excluded.last_remote_seen_at,"
            " last_synced_local_head = excluded.last_synced_local_head,"
            " last_synced_at = excluded.last_synced_at, updated_at = excluded.updated_at",
            (str(dataset_id), remote, hash_to_text(head), now, hash_to_text(head), now, now),
        )

    # --- transfers ------------------------------------------------------------------------------

    async def begin_transfer(
        self,
        dataset_id: DatasetId,
        remote: str,
        direction: Direction,
        target_head: Multihash,
        base_head: Multihash | None,
        objects_total: int | None = None,
    ) -> Transfer:
        """Start (or, for the same target, resume) the transfer of a dataset with a remote."""
        now = now_text()
        key = (str(dataset_id), remote, direction)
        async with self.sql.transaction():
            row = await self.sql.fetchone(
                "SELECT target_head FROM transfers WHERE dataset_id = ? AND remote = ? AND direction = ?",
                key,
            )
            if row is not None and row[0] != hash_to_text(target_head):
                await self.sql.execute(
                    "DELETE FROM transfers WHERE dataset_id = ? AND remote = ? AND direction = ?",
                    key,
                )
                row = None
            if row is None:
                await self.sql.execute(
                    "INSERT INTO transfers (dataset_id, remote, direction, base_head, target_head,"
                    " objects_total, started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        *key,
                        hash_to_text(base_head),
                        hash_to_text(target_head),
                        objects_total,
                        now,
                        now,
                    ),
                )
            transfer = await self.get_transfer(dataset_id, remote, direction)
        assert transfer is not None  # written in the same transaction
        return transfer

    async def get_transfer(
        self, dataset_id: DatasetId, remote: str, direction: Direction
    ) -> Transfer | None:
        row = await self.sql.fetchone(
            "SELECT id, base_head, target_head, objects_total, objects_done, bytes_done, started_at,"
            " updated_at FROM transfers WHERE dataset_id = ? AND remote = ? AND direction = ?",
            (str(dataset_id), remote, direction),
        )
        if row is None:
            return None
        return Transfer(
            row[0],
            dataset_id,
            remote,
            direction,
            hash_from_text(row[1]),
            hash_from_text(row[2]),
            row[3],
            row[4],
            row[5],
            from_text(row[6]),
            from_text(row[7]),
        )

    async def update_transfer(
        self,
        transfer_id: int,
        *,
        objects_done: int,
        bytes_done: int,
        objects_total: int | None = None,
    ) -> None:
        await self.sql.execute(
            "UPDATE transfers SET objects_done = ?, bytes_done = ?,"
            " objects_total = COALESCE(?, objects_total), updated_at = ? WHERE id = ?",
            (objects_done, bytes_done, objects_total, now_text(), transfer_id),
        )

    async def end_transfer(self, transfer_id: int) -> None:
        await self.sql.execute("DELETE FROM transfers WHERE id = ?", (transfer_id,))
