"""The ``resource_references`` table: what each resource's spec points at, resolved to ids.

A reference is resolved once, to the id of the resource of its type and ``[account/]name`` at
that time, and then kept: renaming the target keeps the link, and a new resource taking an old
name does not capture references already bound (RFC-018 "Reference resolution"). Unresolved
(dangling) references are allowed and resolved by :meth:`ResourceReferenceTable.resolve` once
their target exists.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable
from dataclasses import dataclass

from storage.catalog.catalog import Catalog


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    resource_id: str
    path: str
    target_schema: str
    target_name: str | None
    target_id: str | None
    target_key: str | None
    target_exists: bool


@dataclass(frozen=True, slots=True)
class WrittenReference:
    path: str
    target_schema: str
    target_name: str | None
    target_id: str | None
    """The id the manifest gave, if any."""
    target_key: str | None = None


class ResourceReferenceTable:
    def __init__(self, catalog: Catalog) -> None:
        self._sql = catalog.sql

    async def replace(self, resource_id: str, references: list[WrittenReference]) -> None:
        """The references of one resource as now written; an unchanged one keeps its binding."""
        async with self._sql.transaction():
            rows = await self._sql.fetchall(
                "SELECT path, target_schema, target_name, target_id FROM resource_references"
                " WHERE resource_id = ?",
                (resource_id,),
            )
            bound = {(r[0], r[1], r[2]): r[3] for r in rows}
            await self._sql.execute(
                "DELETE FROM resource_references WHERE resource_id = ?", (resource_id,)
            )
            for ref in references:
                target_id = ref.target_id or bound.get(
                    (ref.path, ref.target_schema, ref.target_name)
                )
                await self._sql.execute(
                    "INSERT INTO resource_references"
                    " (resource_id, path, target_schema, target_name, target_id, target_key)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        resource_id,
                        ref.path,
                        ref.target_schema,
                        ref.target_name,
                        target_id,
                        ref.target_key,
                    ),
                )

    async def resolve(self) -> int:
        """Bind every unresolved reference whose target now exists; returns how many."""
        cursor = await self._sql.execute(
            "UPDATE resource_references SET target_id = ("
            " SELECT r.id FROM resources r WHERE r.schema = target_schema"
            " AND lower(r.name) = lower(target_name))"
            " WHERE target_id IS NULL AND EXISTS ("
            " SELECT 1 FROM resources r WHERE r.schema = target_schema"
            " AND lower(r.name) = lower(target_name))"
        )
        return cursor.rowcount

    async def list(self, resource_id: str | None = None) -> list[ReferenceRow]:
        where, args = ("WHERE f.resource_id = ?", (resource_id,)) if resource_id else ("", ())
        return await self._rows(where, args)

    async def list_of(self, resource_ids: Iterable[str]) -> builtins.list[ReferenceRow]:
        """The references of the ``resource_ids``, in one read."""
        return await self._rows(
            "WHERE f.resource_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(resource_ids)),),
        )

    async def list_around(self, resource_ids: Iterable[str]) -> builtins.list[ReferenceRow]:
        """The references of the ``resource_ids`` and of every resource that references one of
        them: the rows an apply of those resources can change the meaning of, without reading
        the whole table."""
        ids = json.dumps(list(resource_ids))
        return await self._rows(
            "WHERE f.resource_id IN (SELECT value FROM json_each(?))"
            " OR f.resource_id IN (SELECT resource_id FROM resource_references"
            " WHERE target_id IN (SELECT value FROM json_each(?)))",
            (ids, ids),
        )

    async def _rows(self, where: str, args: tuple[str, ...]) -> builtins.list[ReferenceRow]:
        rows = await self._sql.fetchall(
            "SELECT f.resource_id, f.path, f.target_schema, f.target_name, f.target_id,"
            " f.target_key, r.id IS NOT NULL FROM resource_references f"
            f" LEFT JOIN resources r ON r.id = f.target_id {where}"
            " ORDER BY f.resource_id, f.path",
            args,
        )
        return [ReferenceRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in rows]
