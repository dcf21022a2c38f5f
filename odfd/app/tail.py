"""``odfd tail``: the last records of a dataset, read straight from its newest slices (no
engine), as of its head or a pinned block or time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from odfd.app.presence import require_files
from odfd.app.query import pinned_at
from odfd.coordinator.query import dataset_view

if TYPE_CHECKING:
    from pathlib import Path

    from odfd.app.node import Node


async def tail(
    node: Node, ref: str, *, records: int, skip: int = 0, as_of: str | None = None
) -> pa.Table:
    """The last ``records`` records of dataset ``ref`` after leaving out its last ``skip`` (to
    page backwards), as of ``as_of`` (a block hash or a time) when given;
    ``DataMissingError`` when files the catalog knows of are gone."""
    workspace = node.workspace
    record = await workspace.resolve(ref)
    dataset = workspace.open_dataset(record.id)
    block, time = await pinned_at(node, as_of)
    view = await dataset_view(dataset, pinned_block=block, pinned_time=time)
    await require_files(workspace, record, view)
    table = last_records(view.paths, view.schema, records + skip)
    return table.slice(0, max(table.num_rows - skip, 0)) if skip else table


def last_records(paths: tuple[Path, ...], schema: pa.Schema | None, n: int) -> pa.Table:
    """The last ``n`` records of the slices (oldest first), reading only the row groups needed."""
    parts: list[pa.Table] = []
    remaining = n
    for path in reversed(paths):
        parquet = pq.ParquetFile(str(path))
        for group in reversed(range(parquet.num_row_groups)):
            if remaining <= 0:
                break
            table = parquet.read_row_group(group)
            if table.num_rows > remaining:
                table = table.slice(table.num_rows - remaining)
            parts.append(table)
            remaining -= table.num_rows
        if remaining <= 0:
            break
    if not parts:
        return (schema or pa.schema([])).empty_table()
    parts.reverse()
    return pa.concat_tables(parts, promote_options="default")
