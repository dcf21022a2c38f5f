"""The ``datasets`` table's rows and the queries that read them, shared by
:class:`storage.catalog.catalog.Catalog`, the server's :mod:`storage.catalog.reader` and the
CLI's :mod:`storage.catalog.sync_reader` (one spelling of each query for all). Imports no
aiosqlite: a command that only reads the catalog needs no event loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from protocol.identity import DatasetId, Multihash
from protocol.model import DatasetKind
from storage.catalog.columns import from_text, hash_from_text

KIND_TO_TEXT = {DatasetKind.ROOT: "root", DatasetKind.DERIVATIVE: "derivative"}
TEXT_TO_KIND = {text: kind for kind, text in KIND_TO_TEXT.items()}


@dataclass(frozen=True, slots=True)
class DatasetRecord:
    id: DatasetId
    alias: str
    kind: DatasetKind
    head: Multihash | None
    head_sequence: int | None
    created_at: datetime
    updated_at: datetime


DATASET_COLUMNS = "id, alias, kind, head, head_sequence, created_at, updated_at"


def dataset_record(row: Sequence[Any]) -> DatasetRecord:
    """The record of a row selected with :data:`DATASET_COLUMNS`."""
    return DatasetRecord(
        id=DatasetId.parse(row[0]),
        alias=row[1],
        kind=TEXT_TO_KIND[row[2]],
        head=hash_from_text(row[3]),
        head_sequence=row[4],
        created_at=from_text(row[5]),
        updated_at=from_text(row[6]),
    )


def list_datasets_query(kind: DatasetKind | None = None) -> tuple[str, tuple[str, ...]]:
    """Every dataset by alias, or those of ``kind``: the SQL and its parameters."""
    where, params = ("", ()) if kind is None else (" WHERE kind = ?", (KIND_TO_TEXT[kind],))
    return f"SELECT {DATASET_COLUMNS} FROM datasets{where} ORDER BY alias COLLATE NOCASE", params


def dataset_by_id_query(id: DatasetId) -> tuple[str, tuple[str, ...]]:
    return f"SELECT {DATASET_COLUMNS} FROM datasets WHERE id = ?", (str(id),)


def dataset_by_alias_query(alias: str) -> tuple[str, tuple[str, ...]]:
    return f"SELECT {DATASET_COLUMNS} FROM datasets WHERE alias = ?", (alias,)
