"""The check behind every answer: the original transform, run on the witness rows alone, must
give the selected row again.

Each input is cut down to its witness rows (a small Parquet file per input, in offset order) and
the transaction's own request runs through the engine's ``run_transform``, exactly as a pull or a
verify would run it; the row is reproduced when some output row has the same values (offset and
system time aside).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from verifier.engine.contract import Engine, TransformInputSlice, TransformRequest
from verifier.provenance.witness import Witnesses, compared_columns


def witness_rows(input_slice: TransformInputSlice, offsets: Sequence[int]) -> pa.Table:
    """The rows of ``input_slice`` at ``offsets``, in offset order, as their slices store them
    (the engine reads the witness file as it read the slices: same types, same precision).

    A slice holds consecutive offsets from its first one (the data layer checks it), so a row
    is taken by position; a file that does not line up is filtered by value instead."""
    schema = input_slice.schema
    assert schema is not None
    wanted = sorted(set(offsets))
    if not wanted or not input_slice.data_paths:
        return schema.empty_table()
    column = input_slice.vocab.offset
    parts = []
    for path in input_slice.data_paths:
        with pq.ParquetFile(path) as file:
            rows = file.metadata.num_rows
            if rows == 0:
                continue
            first = file.read_row_group(0, columns=[column]).column(0)[0].as_py()
            here = [o for o in wanted if first <= o < first + rows]
            if not here:
                continue
            taken = file.read().take(pa.array([o - first for o in here], pa.int64()))
        if taken.column(column).to_pylist() != here:
            data = ds.dataset(str(path), format="parquet")
            taken = data.to_table(filter=ds.field(column).isin(pa.array(here, pa.int64())))
        parts.append(taken)
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts, promote_options="permissive").sort_by(column)


def as_stored(input_slice: TransformInputSlice, rows: pa.Table) -> pa.Table | None:
    """``rows`` of ``input_slice`` as an engine returned them, in the columns and types its
    slice files store (what :func:`witness_rows` would cut out of them); ``None`` when they do
    not convert exactly (the rows are then cut out of the slices instead)."""
    if not input_slice.data_paths:
        return None
    stored = pq.read_schema(input_slice.data_paths[0])
    try:
        columns = [rows.column(f.name).cast(f.type) for f in stored]
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.Table.from_arrays(columns, schema=stored)


def witness_tables(request: TransformRequest, witnesses: Witnesses) -> dict[int, pa.Table]:
    """Each input's witness rows (blocking)."""
    return {
        number: witness_rows(input_slice, witnesses.get(number, ()))
        for number, input_slice in enumerate(request.inputs)
    }


def reproduces(
    request: TransformRequest,
    engine: Engine,
    witnesses: Witnesses | dict[int, pa.Table],
    row: dict[str, Any],
    scratch: Path,
) -> bool:
    """Whether the transform, on only the witness rows (offsets, or the rows themselves as
    :func:`witness_tables` reads them), outputs ``row`` (blocking)."""
    tables = {
        number: rows if isinstance(rows, pa.Table) else witness_rows(request.inputs[number], rows)
        for number, rows in witnesses.items()
    }
    inputs = []
    for number, input_slice in enumerate(request.inputs):
        rows = tables.get(number)
        if rows is None or rows.num_rows == 0:
            inputs.append(dataclasses.replace(input_slice, data_paths=(), offset_interval=None))
            continue
        path = scratch / f"witness-{number}.parquet"
        pq.write_table(rows, path)
        offsets = rows.column(input_slice.vocab.offset).to_pylist()
        inputs.append(
            dataclasses.replace(
                input_slice, data_paths=(path,), offset_interval=(min(offsets), max(offsets))
            )
        )
    out = scratch / "check"
    out.mkdir(parents=True, exist_ok=True)
    result = engine.run_transform(
        dataclasses.replace(request, inputs=tuple(inputs), out_dir=out, spill_dir=str(out))
    )
    if result.new_data is None:
        return False
    output = pq.read_table(result.new_data.path)
    skip = (request.vocab.offset, request.vocab.system_time)
    columns = [c for c in compared_columns(output.schema, output.schema, skip) if c in row]
    wanted = tuple(row[c] for c in columns)
    return any(
        tuple(output.column(c)[i].as_py() for c in columns) == wanted
        for i in range(output.num_rows)
    )
