"""Runs one recorded transaction with tags and reads the witnesses of chosen output rows.

The tagged transform runs through the engine's ordinary raw-query path (:meth:`Engine.query`)
over the transaction's recorded input slices. Its rows are matched to the recorded output rows by
value (the tag column aside): position first, since the rewrite keeps the engine's row order in
simple plans, then a search over the whole result, taking the same occurrence of a repeated row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from protocol.model import SqlQueryStep
from verifier.engine.contract import Engine, QueryTable, TransformRequest, query_steps
from verifier.provenance.dialects import TAG, tag_dialect
from verifier.provenance.errors import ProvenanceError
from verifier.provenance.rewrite import InputTable, raw_table, tag_transform

#: Witnesses of one row: input number -> offsets of that input's rows.
Witnesses = dict[int, tuple[int, ...]]


@dataclass(slots=True)
class TaggedRun:
    """The transaction's result with each row's tags, its where-provenance, and what resolves
    the window frame references in tags (side queries, run once each when first needed)."""

    table: pa.Table
    origins: dict[str, tuple[int, str]]
    engine: Engine
    tables: list[QueryTable]
    frames: tuple[tuple[SqlQueryStep, ...], ...]
    sides: dict[int, pa.Table] = field(default_factory=dict)
    focused: bool = False
    """The run was narrowed to the focused row's group or partition (other rows are missing)."""
    group: dict[int, pa.Table] | None = None
    """Set when the run listed the input rows of the focused row's group (by input, once each,
    in offset order, as the engine read them) instead of tagging output rows."""

    def witnesses(self, tag: str | None) -> Witnesses:
        """The input rows behind a tag string, frame references resolved (blocking)."""
        rows: list[str] = []
        pending, seen = [tag or ""], set()
        while pending:
            for token in pending.pop().split(","):
                if not token or token in seen:
                    continue
                seen.add(token)
                if token.startswith("w"):
                    pending.extend(self._frame_rows(token))
                else:
                    rows.append(token)
        return parse_tags(",".join(rows))

    def _frame_rows(self, reference: str) -> list[str]:
        """Tags of the rows of frame ``w<n>:<partition>:<first>:<last>``."""
        window, part, first, last = (int(x) for x in reference[1:].split(":"))
        if window not in self.sides:
            self.sides[window] = self.engine.query(self.frames[window], self.tables)
        side = self.sides[window]
        if last < max(first, 1):
            return []
        parts, positions = side.column("part"), side.column("pos")
        mask = pc.and_(
            pc.equal(parts, pa.scalar(part, parts.type)),
            pc.and_(
                pc.greater_equal(positions, pa.scalar(max(first, 1), positions.type)),
                pc.less_equal(positions, pa.scalar(last, positions.type)),
            ),
        )
        return [t for t in side.column("tag").filter(mask).to_pylist() if t]


def run_tagged(
    request: TransformRequest, engine: Engine, focus: dict[str, Any] | None = None
) -> TaggedRun:
    """Re-executes the transaction of ``request`` with tags (blocking); ``focus``: the one
    output row asked about, so an aggregation builds the tags of its group only."""
    inputs: list[InputTable] = []
    tables: list[QueryTable] = []
    for number, slice_ in enumerate(request.inputs):
        if slice_.schema is None:
            raise ProvenanceError(
                f"{request.dataset_alias}: input '{slice_.alias}' has no data schema"
            )
        interval = slice_.offset_interval if slice_.data_paths else None
        inputs.append(
            InputTable(slice_.alias, tuple(slice_.schema.names), slice_.vocab.offset, interval)
        )
        paths = slice_.data_paths if interval is not None else ()
        tables.append(QueryTable(raw_table(number), paths, slice_.schema))
    tagged = tag_transform(
        query_steps(request.transform), inputs, tag_dialect(engine.sql_dialect), focus
    )
    table = engine.query(tagged.steps, tables)
    group = None
    if tagged.group_rows is not None:
        group = _split_group(table, tagged.group_rows, inputs)
    return TaggedRun(
        table, tagged.origins, engine, tables, tagged.frames, focused=tagged.focused, group=group
    )


def _split_group(
    table: pa.Table, listing: Sequence[tuple[int, dict[str, str]]], inputs: Sequence[InputTable]
) -> dict[int, pa.Table]:
    """Each input's rows in a group listing: its sources' columns, a left join's missing side
    dropped, a row joined several times kept once, in offset order."""
    parts: dict[int, list[pa.Table]] = {}
    for number, names in listing:
        rows = table.select(list(names)).rename_columns(list(names.values()))
        rows = rows.filter(pc.is_valid(rows.column(inputs[number].offset_column)))
        parts.setdefault(number, []).append(rows)
    group = {}
    for number, found in parts.items():
        column = inputs[number].offset_column
        rows = pa.concat_tables(found).sort_by(column)
        offsets = rows.column(column).combine_chunks()
        if len(offsets) > 1:
            repeated = pc.equal(offsets.slice(1), offsets.slice(0, len(offsets) - 1))
            rows = rows.filter(pa.concat_arrays([pa.array([True]), pc.invert(repeated)]))
        group[number] = rows
    return group


def compared_columns(recorded: pa.Schema, result: pa.Schema, skip: Sequence[str]) -> list[str]:
    """Columns of the recorded slice a result row must equal (system columns in ``skip`` and
    columns the query did not produce, such as an implicit ``op``, aside)."""
    names = {_fold(n) for n in result.names}
    return [n for n in recorded.names if n not in skip and _fold(n) in names]


def locate(
    result: pa.Table, recorded: pa.Table, positions: Sequence[int], columns: Sequence[str]
) -> list[str | None]:
    """The tag string of the result row equal to each recorded row at ``positions`` (``None``
    when no result row equals it)."""
    by_fold = {_fold(n): n for n in result.schema.names}
    cast = {
        c: _as_type(result.column(by_fold[_fold(c)]), recorded.schema.field(c).type)
        for c in columns
    }
    tags = result.column(TAG)
    same_shape = result.num_rows == recorded.num_rows
    found: list[str | None] = []
    for position in positions:
        target = _row(recorded, position, columns)
        if same_shape and _row_of(cast, position, columns) == target:
            found.append(tags[position].as_py())
            continue
        found.append(_search(cast, tags, recorded, position, columns, target))
    return found


def parse_tags(text: str | None) -> Witnesses:
    """Row tags (``input:offset``, no frame references) grouped by input:
    ``"0:3,1:7,0:4"`` -> ``{0: (3, 4), 1: (7,)}``."""
    grouped: dict[int, set[int]] = {}
    for tag in (text or "").split(","):
        if not tag:
            continue
        number, _, offset = tag.partition(":")
        grouped.setdefault(int(number), set()).add(int(offset))
    return {k: tuple(sorted(v)) for k, v in sorted(grouped.items())}


def row_values(table: pa.Table, position: int, columns: Sequence[str]) -> dict[str, Any]:
    return {c: table.column(c)[position].as_py() for c in columns}


def _search(
    cast: dict[str, pa.ChunkedArray],
    tags: pa.ChunkedArray,
    recorded: pa.Table,
    position: int,
    columns: Sequence[str],
    target: tuple[Any, ...],
) -> str | None:
    """The tag of the n-th result row equal to ``target``, n = its occurrence in ``recorded``."""
    occurrence = 0
    if position:
        earlier = recorded.slice(0, position)
        occurrence = _count_equal({c: earlier.column(c) for c in columns}, columns, target)
    mask = _equal_mask(cast, columns, target)
    matches = pc.indices_nonzero(mask).to_pylist() if mask is not None else []
    if occurrence < len(matches):
        tag: str | None = tags[matches[occurrence]].as_py()
        return tag
    return None


def _count_equal(arrays: dict[str, Any], columns: Sequence[str], target: tuple[Any, ...]) -> int:
    mask = _equal_mask(arrays, columns, target)
    return 0 if mask is None else int(pc.sum(mask).as_py() or 0)


def _equal_mask(
    arrays: dict[str, Any], columns: Sequence[str], target: tuple[Any, ...]
) -> pa.ChunkedArray | None:
    mask = None
    for column, value in zip(columns, target, strict=True):
        array = arrays[column]
        if value is None:
            here = pc.is_null(array)
        else:
            here = pc.fill_null(pc.equal(array, pa.scalar(value, array.type)), False)
        mask = here if mask is None else pc.and_(mask, here)
    return mask


def _row(table: pa.Table, position: int, columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(table.column(c)[position].as_py() for c in columns)


def _row_of(arrays: dict[str, pa.ChunkedArray], position: int, columns: Sequence[str]) -> tuple:
    return tuple(arrays[c][position].as_py() for c in columns)


def _as_type(array: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """The result column as the slice stores it (timestamps become milliseconds in UTC...)."""
    if array.type == target:
        return array
    try:
        return pc.cast(array, target, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return array


def _fold(name: str) -> str:
    return name.lower()
