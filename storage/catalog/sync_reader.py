"""A synchronous view of the catalog for commands that only read it (``odfd list``, ``log``,
``status``): plain sqlite3 running the queries of the record modules (``storage.catalog.records``
and its siblings), no aiosqlite and no event loop, which would cost such a command a third of its
start-up (the server's lookups use :mod:`storage.catalog.reader`, which lives on the daemon's
loop).

It reads only a catalog already at this odfd's schema and never writes (``query_only``). Anything
else — no file yet, an older schema that ``Catalog.open`` would migrate, a file SQLite cannot
read — makes :func:`open_sync_reader` answer ``None``; the caller then opens the workspace as every
other command does, which migrates or reports the problem.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from protocol.identity import DatasetId, DatasetRef
from protocol.model import DatasetKind
from storage.catalog.audit_records import LATEST_AUDITS_QUERY, AuditRecord, latest_audits
from storage.catalog.migrations import load_migrations
from storage.catalog.mirror_records import (
    LATEST_ATTEMPTS_QUERY,
    LIST_MIRRORS_QUERY,
    MirrorRecord,
    SyncAttempt,
    latest_attempts,
    mirror_record,
)
from storage.catalog.records import (
    DatasetRecord,
    dataset_by_alias_query,
    dataset_by_id_query,
    dataset_record,
    list_datasets_query,
)
from storage.catalog.signed_head_records import (
    ALL_SIGNED_HEADS_QUERY,
    FREEZE_BOUNDS_QUERY,
    SeenSignedHead,
    freeze_bounds,
    signed_heads,
)

#: How long a read waits for another process's write (as ``Catalog.open`` sets it).
BUSY_TIMEOUT_MS = 10000


class SyncCatalogReader:
    """Read-only queries on one connection; ``close()`` it (or use ``with``)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def list_datasets(self, kind: DatasetKind | None = None) -> list[DatasetRecord]:
        return [dataset_record(row) for row in self._db.execute(*list_datasets_query(kind))]

    def find_dataset(self, ref: str) -> DatasetRecord | None:
        """The dataset ``ref`` names (id or alias), as ``Workspace.try_resolve`` finds it."""
        parsed = DatasetRef.parse(ref)
        query = (
            dataset_by_id_query(parsed.id)
            if parsed.id is not None
            else dataset_by_alias_query(str(parsed.alias))
        )
        row = self._db.execute(*query).fetchone()
        return None if row is None else dataset_record(row)

    def signed_heads(self) -> dict[DatasetId, SeenSignedHead]:
        return signed_heads(self._db.execute(ALL_SIGNED_HEADS_QUERY))

    def freeze_bounds(self) -> dict[str, float]:
        return freeze_bounds(self._db.execute(FREEZE_BOUNDS_QUERY).fetchall())

    def mirrors(self) -> list[MirrorRecord]:
        return [mirror_record(row) for row in self._db.execute(LIST_MIRRORS_QUERY)]

    def latest_attempts(self) -> dict[str, SyncAttempt]:
        """Each mirror's newest attempt, by mirror name."""
        return latest_attempts(self._db.execute(LATEST_ATTEMPTS_QUERY))

    def latest_audits(self) -> dict[DatasetId, AuditRecord]:
        """Each dataset's newest audit."""
        return latest_audits(self._db.execute(LATEST_AUDITS_QUERY))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SyncCatalogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_sync_reader(path: Path) -> SyncCatalogReader | None:
    """A reader of the catalog at ``path``, or ``None`` when only ``Catalog.open`` may open it."""
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA query_only = ON")
        (applied,) = db.execute("SELECT max(version) FROM schema_migrations").fetchone()
    except sqlite3.Error:
        db.close()
        return None
    if applied != len(load_migrations()):
        db.close()
        return None
    return SyncCatalogReader(db)
