"""A page of a dataset's rows, newest first, read straight from its newest slices (no engine):
the console's data tab. Only the slices the page reaches are read, and a slice the chain names
but the node lacks is one line naming its hash (never the node's paths)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from odfd.app.presence import DataMissingError
from verifier.engine.inputs import all_slices, slice_paths

if TYPE_CHECKING:
    from pathlib import Path

    from storage.catalog import DatasetRecord
    from storage.dataset import Dataset


@dataclass(frozen=True, slots=True)
class RowPage:
    columns: list[str]
    rows: list[list[Any]]
    """Newest first, each in ``columns``' order."""
    total: int
    """Rows in the whole dataset."""


async def newest_rows(
    record: DatasetRecord, dataset: Dataset, *, offset: int, limit: int
) -> RowPage:
    """``limit`` rows after skipping the newest ``offset``; ``DataMissingError`` when a slice
    is not on this node."""
    hashes = await all_slices(dataset) if record.head is not None else []
    missing = [h for h in hashes if not await dataset.data.contains(h)]
    if missing:
        raise DataMissingError(
            f"dataset {record.alias}: {len(missing)} of its {len(hashes)} data slice(s) are "
            f"missing on this node (first: {missing[0]}); pull it again"
        )
    paths = await slice_paths(dataset, hashes)
    return await asyncio.to_thread(_read_page, list(paths), offset, limit)


def _read_page(paths: list[Path], offset: int, limit: int) -> RowPage:
    """Reads only the newest slices the page needs (blocking)."""
    counts = [pq.read_metadata(path).num_rows for path in paths]
    total = sum(counts)
    columns: list[str] = []
    rows: list[list[Any]] = []
    skip = offset
    for path, count in zip(reversed(paths), reversed(counts), strict=True):
        if skip >= count:
            skip -= count
            continue
        with pq.ParquetFile(path) as file:  # not pq.read_table: ~3 s to set up on first use
            table = file.read()
        columns = columns or table.column_names
        for row in reversed(table.slice(0, count - skip).to_pylist()):
            rows.append([row[c] for c in table.column_names])
            if len(rows) >= limit:
                return RowPage(columns, rows, total)
        skip = 0
    if not columns and paths:
        columns = pq.read_schema(paths[-1]).names
    return RowPage(columns, rows, total)
