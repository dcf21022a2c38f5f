"""RFC-018 ``Projection`` resources: a named SQL query over datasets (e.g. the latest value per
key), queryable by its name wherever ``odfd.app.query`` answers (``odfd sql``, the console's SQL
box) as if it were a table, and never written into any dataset's chain.

A projection is kept current by being computed against its inputs' heads: its result is cached
(a Parquet file under the workspace's ``cache/projections``), keyed by the projection's
generation and its inputs' heads, so it is recomputed exactly when an input moved or the
projection changed. ``latest(x)`` — the spec's example — is the value of ``x`` in the newest
record (the greatest ``offset``), written for the engine as ``last_value(x ORDER BY "offset")``.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from odfd.app.resource_types import PROJECTION
from odfd.coordinator.query import DatasetView, dataset_view
from odfd.errors import OdfdError
from protocol.model import SqlQueryStep
from storage.catalog.resources import ResourceRecord, ResourceTable
from verifier.engine.contract import QueryTable
from verifier.errors import VerifierError

if TYPE_CHECKING:
    from odfd.app.node import Node

_LATEST = re.compile(r"\blatest\s*\(", re.IGNORECASE)
_ENGINES = ("datafusion",)
_KEPT_RESULTS = 4
"""Results kept per projection, the newest first."""


class ProjectionError(OdfdError):
    """A projection that cannot be computed now; ``code`` names the condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ProjectionSpec:
    name: str
    inputs: tuple[str, ...]
    """The aliases of the datasets it reads."""
    engine: str
    query: str

    @classmethod
    def from_record(cls, record: ResourceRecord) -> ProjectionSpec:
        where = f"Projection {record.name}"
        spec: dict[str, Any] = record.spec
        inputs = []
        for n, item in enumerate(spec.get("inputs") or []):
            ref = item.get("datasetRef") if isinstance(item, dict) else None
            if not isinstance(ref, str) or not ref:
                raise ProjectionError("invalid-spec", f"{where}: spec.inputs[{n}]: no datasetRef")
            if item.get("alias") not in (None, ref):
                raise ProjectionError(
                    "invalid-spec",
                    f"{where}: spec.inputs[{n}].alias: a projection reads datasets by their names",
                )
            inputs.append(ref)
        project = spec.get("project") or {}
        engine = str(project.get("engine", ""))
        if project.get("kind") != "Sql" or engine not in _ENGINES:
            raise ProjectionError(
                "unsupported-engine",
                f"{where}: spec.project: odfd projects with Sql in {', '.join(_ENGINES)}, not "
                f"{project.get('kind')} in {engine or 'no engine'}",
            )
        query = project.get("query")
        if not isinstance(query, str) or not query.strip():
            queries = project.get("queries") or []
            if len(queries) != 1 or not isinstance(queries[0].get("query"), str):
                raise ProjectionError("invalid-spec", f"{where}: spec.project: give one query")
            query = queries[0]["query"]
        return cls(record.name, tuple(inputs), engine, with_latest(query))


def with_latest(sql: str) -> str:
    """``latest(x)`` as ``last_value(x ORDER BY "offset")`` (outside quotes)."""
    out, pos = [], 0
    for match in _LATEST.finditer(sql):
        if match.start() < pos or _quoted(sql, match.start()):
            continue
        end = _closing(sql, match.end())
        if end is None:
            break
        out.append(sql[pos : match.start()])
        out.append(f'last_value({sql[match.end() : end]} ORDER BY "offset")')
        pos = end + 1
    out.append(sql[pos:])
    return "".join(out)


def _quoted(sql: str, at: int) -> bool:
    """Whether ``at`` is inside a quoted string or identifier."""
    quote = None
    for char in sql[:at]:
        if quote is None and char in "'\"`":
            quote = char
        elif char == quote:
            quote = None
    return quote is not None


def _closing(sql: str, start: int) -> int | None:
    depth, quote = 1, None
    for i in range(start, len(sql)):
        char = sql[i]
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


@dataclass(frozen=True, slots=True)
class ProjectedTable:
    """A projection's result as a query reads it, and the datasets (at the blocks) it was
    computed from: what an answer records as read."""

    table: QueryTable
    inputs: tuple[DatasetView, ...]

    @property
    def version(self) -> str:
        """What identifies the result: its file, named by generation and input heads."""
        return str(self.table.paths[0])


class Projections:
    """The projections of a node, computed when a query reads them."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.resources = ResourceTable(node.workspace.catalog)

    async def named(self, readable: Collection[str]) -> dict[str, ResourceRecord]:
        """Projections by name, of those whose every input is one of the ``readable`` dataset
        aliases (what the authorization decision lets the caller read, or what a request pins)."""
        found = {}
        for record in await self.resources.list(PROJECTION.schema):
            try:
                spec = ProjectionSpec.from_record(record)
            except ProjectionError:
                continue
            if all(alias in readable for alias in spec.inputs):
                found[record.name] = record
        return found

    async def table(
        self, record: ResourceRecord, views: Mapping[str, DatasetView] | None = None
    ) -> ProjectedTable:
        """The projection's result over ``views`` of its inputs (by alias; by default each input
        at its head), as a table a query can read."""
        spec = ProjectionSpec.from_record(record)
        workspace = self.node.workspace
        inputs = []
        for alias in spec.inputs:
            if views is not None and alias in views:
                inputs.append(views[alias])
                continue
            found = await workspace.catalog.find_by_alias(alias)
            if found is None:
                raise ProjectionError(
                    "missing-input", f"Projection {record.name}: dataset {alias} does not exist"
                )
            inputs.append(await dataset_view(workspace.open_dataset(found.id)))
        key = hashlib.sha256(
            repr((record.id, record.generation, [str(v.head) for v in inputs])).encode()
        ).hexdigest()[:32]
        path = workspace.root / "cache" / "projections" / f"{record.id}-{key}.parquet"
        if not path.exists():
            tables = [QueryTable(v.alias, v.paths, v.schema) for v in inputs if v.head is not None]
            engine = await asyncio.to_thread(self.node.engines.named, spec.engine)
            try:
                result = await asyncio.to_thread(
                    engine.query, [SqlQueryStep(query=spec.query)], tables
                )
            except VerifierError as err:  # every engine fails as one of these
                raise ProjectionError(
                    "query-failed", f"Projection {record.name}: {type(err).__name__}: {err}"
                ) from None
            await asyncio.to_thread(_write, path, result, f"{record.id}-*.parquet")
        return ProjectedTable(QueryTable(record.name, (path,), None), tuple(inputs))


def _write(path: Path, table: Any, older: str) -> None:
    """The result at ``path``; of the projection's older results (``older``: a glob), only the
    newest few stay (a query planned over one a moment ago, or an answer pinned to older blocks,
    may still read it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.tmp")  # writers may race
    pq.write_table(table, staged)
    staged.replace(path)
    kept = sorted(path.parent.glob(older), key=_modified, reverse=True)
    for stale in kept[_KEPT_RESULTS:]:
        stale.unlink(missing_ok=True)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
