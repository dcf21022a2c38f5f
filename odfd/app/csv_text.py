"""A query result as CSV text, written as the reference's CSV writer writes it (kamu-cli's
``data-utils`` ``format/csv.rs``, behind ``kamu sql``/``kamu tail -o csv``): a field, header
included, is quoted only when it holds a comma, a quote or a line break; timestamps, dates and
times in RFC 3339 (``2020-01-01T12:00:00Z``, as the query API writes them); binary as hex;
decimals as their exact text; lists and structs as their JSON text; a null as an empty field.
Each line ends with a newline (the reference leaves the last one open; a terminal wants it)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

_NEEDS_QUOTES = (",", '"', "\n", "\r")


def csv_text(table: pa.Table) -> str:
    """``table``'s header and rows; nothing for a result without columns."""
    from protocol.query.render.columns import Style, render_column

    if not table.column_names:
        return ""
    columns = []
    for column in table.columns:
        array = column.combine_chunks()
        texts = render_column(array, Style()).to_pylist()
        valid = array.is_valid().to_pylist()
        columns.append([_field(text) if ok else "" for text, ok in zip(texts, valid, strict=True)])
    lines = [",".join(_escaped(name) for name in table.column_names)]
    lines += [",".join(row) for row in zip(*columns, strict=True)]
    return "".join(line + "\n" for line in lines)


def _field(json_text: str) -> str:
    """A value's CSV field from its JSON text: a JSON string's own text, anything else as is."""
    return _escaped(json.loads(json_text) if json_text.startswith('"') else json_text)


def _escaped(text: str) -> str:
    if not any(mark in text for mark in _NEEDS_QUOTES):
        return text
    return '"' + text.replace('"', '""') + '"'
