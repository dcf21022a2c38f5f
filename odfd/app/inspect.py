"""``odfd inspect``'s use cases: a dataset's lineage, its schema, and the transform behind every
block that changed it, each a typed answer the caller renders (the console shows the same facts
from ``odfd.app.dataset_details`` and ``odfd.app.lineage``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odfd.app.dataset_details import TransformStep, schema_document, transform_history
from odfd.app.lineage import LineageError, LineageGraph, build_lineage
from odfd.errors import OdfdError
from protocol.identity import DatasetRef

if TYPE_CHECKING:
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord
    from storage.dataset import Dataset


class NoSchemaError(OdfdError):
    """The dataset has no schema yet: no data was ever added."""


@dataclass(frozen=True, slots=True)
class DatasetSchema:
    alias: str
    odf: dict[str, Any] | None
    """The ``SetDataSchema`` event as JSON (``None`` for a legacy schema without one)."""
    arrow: list[dict[str, Any]]
    """The Arrow schema's fields: ``name``, ``type``, ``nullable``."""
    ddl: str

    def to_json(self) -> dict[str, Any]:
        return {"odf": self.odf, "arrow": self.arrow, "ddl": self.ddl}


@dataclass(frozen=True, slots=True)
class TransformHistory:
    alias: str
    kind: str
    """``Root`` or ``Derivative``: a root dataset has no transform."""
    steps: list[TransformStep]


async def lineage(node: Node, ref: str, *, downstream: bool = False) -> LineageGraph:
    """Every input of ``ref``, recursively (with ``downstream`` its readers too);
    ``LineageError`` when the workspace has no such dataset."""
    return await build_lineage(node.workspace, ref, downstream=downstream)


async def dataset_schema(node: Node, ref: str) -> DatasetSchema:
    """The dataset's ODF and Arrow schema and its DDL; ``NoSchemaError`` before its first data."""
    record, dataset = await _dataset(node, ref)
    document = await schema_document(dataset)
    if document["arrow"] is None:
        raise NoSchemaError(f"{record.alias} has no schema yet (no data was added)")
    return DatasetSchema(record.alias, document["odf"], document["arrow"], document["ddl"])


async def transforms(node: Node, ref: str) -> TransformHistory:
    """Oldest first: every ``SetTransform`` of the dataset and the blocks it produced."""
    record, dataset = await _dataset(node, ref)
    return TransformHistory(record.alias, record.kind.value, await transform_history(dataset))


async def _dataset(node: Node, ref: str) -> tuple[DatasetRecord, Dataset]:
    workspace = node.workspace
    record = await workspace.try_resolve(DatasetRef.parse(ref))
    if record is None:
        raise LineageError(f"no dataset {ref} in the workspace at {workspace.root}")
    return record, workspace.open_dataset(record.id)
