"""A collection's entries, one entry and the service document in OData 2/3's "verbose" JSON
(``{"d": ...}``), for the clients that read no Atom (SAP's ``pyodata``, datajs): a feed is
``{"d": {"results": [...], "__count": "N", "__next": "url"}}``, each entry carries
``__metadata`` (its ``uri`` and ``type``). Values as [MS-ODATA] 2.2.6.3.1 writes them: Int64
as a string, Edm.DateTime as ``/Date(ms)/`` and Edm.DateTimeOffset as ``/Date(ms+0000)/``
(UTC, the form SAP's clients read), NaN and infinities as the strings ``NaN``, ``INF``,
``-INF``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.types as pt

from odfd.app.odata import ODataCollection, ODataRows
from odfd.app.odata_query import KEY_ALIAS
from odfd.server.odata.csdl import NAMESPACE
from odfd.server.odata.edm import column_texts, edm_type

_MS_PER_DAY = 86_400_000
_PER_MS = {"s": -1000, "ms": 1, "us": 1_000, "ns": 1_000_000}
"""Ticks of each unit per millisecond (negative: milliseconds per tick)."""
_FLOAT_WORDS = {"nan": "NaN", "inf": "INF", "-inf": "-INF"}


def service_document(collections: Sequence[ODataCollection]) -> str:
    """The entity sets' names (``{"d": {"EntitySets": [...]}}``)."""
    return _dumps({"d": {"EntitySets": [collection.name for collection in collections]}})


def feed(
    base: str,
    collection: ODataCollection,
    rows: ODataRows,
    next_url: str | None,
    piece_rows: int,
) -> Iterator[str]:
    """The feed of ``rows`` in pieces of ``piece_rows`` entries, with ``__count`` when
    ``$inlinecount=allpages`` asked and ``__next`` when the node cut the page short."""
    table = pa.Table.from_batches(rows.batches, rows.schema)
    yield '{"d":{"results":['
    for start in range(0, table.num_rows, piece_rows):
        body = ",".join(_entries(base, collection, table.slice(start, piece_rows)))
        yield ("," if start else "") + body
    tail = "]"
    if rows.count is not None:
        tail += f',"__count":{_dumps(str(rows.count))}'
    if next_url is not None:
        tail += f',"__next":{_dumps(next_url)}'
    yield tail + "}}"


def entry(base: str, collection: ODataCollection, rows: ODataRows) -> str:
    """The single row of ``rows`` as an entry document (``{"d": {...}}``)."""
    (body,) = _entries(base, collection, pa.Table.from_batches(rows.batches, rows.schema))
    return f'{{"d":{body}}}'


def _entries(base: str, collection: ODataCollection, table: pa.Table) -> Iterator[str]:
    keys = table.column(KEY_ALIAS).to_pylist()
    columns = [
        (field.name, json_values(column))
        for field, column in zip(table.schema, table.columns, strict=True)
        if field.name != KEY_ALIAS and edm_type(field.type) is not None
    ]
    kind = f"{NAMESPACE}.{collection.name}"
    for row, key in enumerate(keys):
        entity: dict[str, Any] = {
            "__metadata": {"uri": f"{base}/{collection.name}({key})", "type": kind}
        }
        for name, values in columns:
            entity[name] = values[row]
        yield _dumps(entity)


def json_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column of a type with an Edm type as verbose JSON values (``None`` for a null)."""
    data_type = array.type
    if pt.is_timestamp(data_type):
        ticks = array.cast(pa.int64()).to_pylist()
        per_ms = _PER_MS[data_type.unit]  # floored to the millisecond, as Atom's texts
        millis = [None if tick is None else _to_ms(tick, per_ms) for tick in ticks]
        suffix = "" if data_type.tz is None else "+0000"
        return [None if ms is None else f"/Date({ms}{suffix})/" for ms in millis]
    if pt.is_date32(data_type) or pt.is_date64(data_type):
        days = array.cast(pa.date32()).cast(pa.int32()).to_pylist()
        return [None if day is None else f"/Date({day * _MS_PER_DAY})/" for day in days]
    values = array.to_pylist()
    if edm_type(data_type) == "Edm.Int64":  # beyond JavaScript's exact integers: a string
        return [None if value is None else str(value) for value in values]
    if pt.is_float16(data_type) or pt.is_float32(data_type):  # shortest digits, as in Atom
        texts = column_texts(array)
        return [None if text is None else _float(float(text)) for text in texts]
    if pt.is_floating(data_type):
        return [_float(value) for value in values]
    return values


def _to_ms(tick: int, per_ms: int) -> int:
    return tick * -per_ms if per_ms < 0 else tick // per_ms


def _float(value: float | None) -> float | str | None:
    if value is None or value - value == 0:  # finite
        return value
    return _FLOAT_WORDS[str(value)]


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
