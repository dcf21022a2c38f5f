"""The ``resources`` table: declarative resources (RFC-018) as applied, with their status.

``put`` implements the apply rule of generations: a resource is created at generation 1, and
its generation is bumped only when its desired state (``spec``, labels, annotations) changed;
applying an unchanged manifest writes nothing. Status is written only by controllers (and set
back to ``Pending`` by a new generation).
"""

from __future__ import annotations

import builtins
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiosqlite

from storage.catalog.catalog import Catalog
from storage.catalog.columns import from_text, now_text
from storage.errors import StorageError

JsonObject = dict[str, Any]


class ResourceNotFoundError(StorageError, LookupError):
    """No resource of that type and name (or id)."""


@dataclass(frozen=True, slots=True)
class ResourceRecord:
    id: str
    schema: str
    name: str
    labels: JsonObject
    annotations: JsonObject
    spec: JsonObject
    generation: int
    status: JsonObject
    created_at: datetime
    updated_at: datetime
    owner_id: str | None = None
    """The resource that made this one (RFC-018 ``ownerReference``); deleting it deletes this."""


@dataclass(frozen=True, slots=True)
class PutResult:
    record: ResourceRecord
    change: str
    """``created``, ``configured`` (generation bumped) or ``unchanged``."""


def canonical(value: Any) -> str:
    """The stored form of a JSON value: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_COLUMNS = (
    "id, schema, name, labels, annotations, spec, generation, status, created_at, updated_at,"
    " owner_id"
)


def _record(row: aiosqlite.Row) -> ResourceRecord:
    return ResourceRecord(
        id=row[0],
        schema=row[1],
        name=row[2],
        labels=json.loads(row[3]),
        annotations=json.loads(row[4]),
        spec=json.loads(row[5]),
        generation=row[6],
        status=json.loads(row[7]),
        created_at=from_text(row[8]),
        updated_at=from_text(row[9]),
        owner_id=row[10],
    )


class ResourceTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def put(
        self,
        schema: str,
        name: str,
        spec: JsonObject,
        *,
        labels: JsonObject,
        annotations: JsonObject,
        resource_id: str | None,
        initial_status: JsonObject,
        owner_id: str | None = None,
    ) -> PutResult:
        """Create or update the resource named by ``resource_id`` (if given) else by type and name."""
        async with self._sql.transaction():
            if resource_id is not None:
                row = await self._sql.fetchone(
                    f"SELECT {_COLUMNS} FROM resources WHERE id = ?", (resource_id,)
                )
                if row is not None and row[1] != schema:
                    raise StorageError(f"resource {resource_id} is a {row[1]}, not a {schema}")
            else:
                row = await self._sql.fetchone(
                    f"SELECT {_COLUMNS} FROM resources WHERE schema = ? AND name = ?",
                    (schema, name),
                )
            now = now_text()
            if row is None:
                new_id = resource_id or str(uuid.uuid4())
                try:
                    await self._sql.execute(
                        f"INSERT INTO resources ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                        (
                            new_id,
                            schema,
                            name,
                            canonical(labels),
                            canonical(annotations),
                            canonical(spec),
                            canonical(initial_status),
                            now,
                            now,
                            owner_id,
                        ),
                    )
                except aiosqlite.IntegrityError:
                    raise StorageError(
                        f"another {schema} resource is already named {name}"
                    ) from None
                change, record_id = "created", new_id
            else:
                current = _record(row)
                record_id = current.id
                same = (
                    current.name == name
                    and canonical(current.spec) == canonical(spec)
                    and canonical(current.labels) == canonical(labels)
                    and canonical(current.annotations) == canonical(annotations)
                )
                if same:
                    change = "unchanged"
                else:
                    try:  # a new generation waits for its controller: Pending (RFC-018)
                        await self._sql.execute(
                            "UPDATE resources SET name = ?, labels = ?, annotations = ?, spec = ?,"
                            " generation = generation + 1, status = json_set(status, '$.phase', 'Pending'),"
                            " updated_at = ? WHERE id = ?",
                            (
                                name,
                                canonical(labels),
                                canonical(annotations),
                                canonical(spec),
                                now,
                                record_id,
                            ),
                        )
                    except aiosqlite.IntegrityError:
                        raise StorageError(
                            f"another {schema} resource is already named {name}"
                        ) from None
                    change = "configured"
            record = await self.get(record_id)
        assert record is not None  # written in the same transaction
        return PutResult(record, change)

    async def get(self, resource_id: str) -> ResourceRecord | None:
        row = await self._sql.fetchone(
            f"SELECT {_COLUMNS} FROM resources WHERE id = ?", (resource_id,)
        )
        return None if row is None else _record(row)

    async def find(self, schema: str, name: str) -> ResourceRecord | None:
        row = await self._sql.fetchone(
            f"SELECT {_COLUMNS} FROM resources WHERE schema = ? AND name = ?", (schema, name)
        )
        return None if row is None else _record(row)

    async def get_many(self, resource_ids: Iterable[str]) -> dict[str, ResourceRecord]:
        """The resources of those ids that exist, by id, in one read."""
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM resources WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(resource_ids)),),
        )
        return {row[0]: _record(row) for row in rows}

    async def list(self, schema: str | None = None) -> list[ResourceRecord]:
        where, args = ("WHERE schema = ?", (schema,)) if schema is not None else ("", ())
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM resources {where} ORDER BY schema, name", args
        )
        return [_record(row) for row in rows]

    async def stamp(self, schema: str) -> tuple[int, str | None, int]:
        """Changes whenever a resource of ``schema`` is added, changed or deleted: caches of what
        they say check it instead of reading them all."""
        row = await self._sql.fetchone(
            "SELECT count(*), max(updated_at), total(generation) FROM resources WHERE schema = ?",
            (schema,),
        )
        assert row is not None
        return int(row[0]), row[1], int(row[2])

    async def list_unsettled(self) -> builtins.list[ResourceRecord]:
        """Resources not ``Ready`` at their current generation (the ones a controller may still
        have work for), filtered in SQL so thousands of settled ones cost nothing to skip."""
        rows = await self._sql.fetchall(
            f"SELECT {_COLUMNS} FROM resources WHERE json_extract(status, '$.phase') IS NOT 'Ready'"
            " OR json_extract(status, '$.observedGeneration') IS NOT generation"
            " ORDER BY schema, name"
        )
        return [_record(row) for row in rows]

    async def condition_everywhere(
        self, key: str, of: Iterable[str] | None = None
    ) -> dict[str, JsonObject | None]:
        """The condition ``key`` of every resource (or of those with the ids ``of``; None where
        it has none), by id: one column read, without decoding whole resources."""
        if '"' in key:
            raise StorageError(f"condition key {key!r} must not contain a double quote")
        path = f'$.conditions."{key}"'
        if of is None:
            rows = await self._sql.fetchall(
                "SELECT id, json_extract(status, ?) FROM resources", (path,)
            )
        else:
            rows = await self._sql.fetchall(
                "SELECT id, json_extract(status, ?) FROM resources"
                " WHERE id IN (SELECT value FROM json_each(?))",
                (path, json.dumps(list(of))),
            )
        return {row[0]: None if row[1] is None else json.loads(row[1]) for row in rows}

    async def update_status(
        self,
        resource_id: str,
        *,
        phase: str | None = None,
        observed_generation: int | None = None,
        conditions: Mapping[str, JsonObject | None] | None = None,
    ) -> bool:
        """Change parts of a resource's status in one statement (so the controllers and the
        writers of conditions never lose each other's updates): ``phase`` and
        ``observedGeneration`` (then ``reconciledAt`` is set to now), and conditions by key
        (``None`` removes one). Writes nothing, and returns False, when nothing would change."""
        expression = "status"
        args: list[Any] = []
        if phase is not None:
            expression, args = f"json_set({expression}, '$.phase', ?)", [*args, phase]
        if observed_generation is not None:
            expression, args = (
                f"json_set({expression}, '$.observedGeneration', ?)",
                [*args, observed_generation],
            )
        for key, value in (conditions or {}).items():
            if '"' in key:
                raise StorageError(f"condition key {key!r} must not contain a double quote")
            path = f'$.conditions."{key}"'
            if value is None:
                expression, args = f"json_remove({expression}, ?)", [*args, path]
            else:
                expression, args = (
                    f"json_set({expression}, ?, json(?))",
                    [*args, path, canonical(value)],
                )
        if expression == "status":
            return False
        now = now_text()
        stamped, stamp_args = expression, list(args)
        if phase is not None or observed_generation is not None:
            stamped, stamp_args = f"json_set({expression}, '$.reconciledAt', ?)", [*args, now]
        changes = await self._sql.execute(
            f"UPDATE resources SET status = {stamped}, updated_at = ? WHERE id = ? AND status != {expression}",
            (*stamp_args, now, resource_id, *args),
        )
        return changes.rowcount > 0

    async def rewrite(self, resource_id: str, name: str, spec: JsonObject) -> None:
        """Change a resource's name and spec for the node's own reasons (a dataset it names was
        renamed): a new generation, ``Pending`` until its controller has seen it, as an apply
        would make it."""
        try:
            await self._sql.execute(
                "UPDATE resources SET name = ?, spec = ?, generation = generation + 1,"
                " status = json_set(status, '$.phase', 'Pending'), updated_at = ? WHERE id = ?",
                (name, canonical(spec), now_text(), resource_id),
            )
        except aiosqlite.IntegrityError:
            raise StorageError(f"another resource of its type is already named {name}") from None

    async def delete(self, resource_id: str) -> None:
        """Delete a resource and, through ``owner_id``'s cascade, every resource it owns."""
        await self._sql.execute("DELETE FROM resources WHERE id = ?", (resource_id,))
