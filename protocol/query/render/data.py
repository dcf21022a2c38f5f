"""The ``data`` of an answer, written batch by batch in JsonAoS, JsonSoA or JsonAoA.

The reference's ``/query`` writes rows with its own record writers, reads the text back into a JSON
value and writes that value again; so objects come out with sorted keys (a repeated column name
keeps its last value). Its ``/{dataset}/tail`` sends the writers' text as it is: keys in schema
order (``schema_order``). Its data writers skip empty batches but JsonSoA takes its columns from the
first batch it sees (``{}`` when there is none). The writer here produces those bytes directly,
in the wire form (what the client receives), the canonical form (what is hashed) or both, one
bounded chunk of rows at a time: nothing holds the whole result twice, except JsonSoA, which
cannot be streamed and is capped like the reference's (``DataTooLargeError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from protocol.query.errors import DataTooLargeError
from protocol.query.render.columns import (
    Style,
    column_pieces,
    differs_by_style,
    object_key,
    object_layout,
)
from protocol.query.render.small import SMALL_ROWS, small_texts
from protocol.query.render.text import (
    TEXT,
    Piece,
    constant,
    data_bytes,
    join,
    merged_constants,
)
from protocol.query.request import DataFormat

ROWS_PER_CHUNK = 65_536
"""Rows rendered at once, at most: a streamed answer's whole batch (``STREAMING_SETTINGS``). A
1M-row answer renders ~20% faster than in chunks of 16,384 (less per-chunk work, and more
tables small enough to fold)."""
VALUES_PER_CHUNK = 8 * ROWS_PER_CHUNK
"""Values (rows x columns) rendered at once, at most: bounds the temporary arrays whatever the
batch's size and width (~10 MB of text for a typical dataset's rows)."""
MAX_SOA_BYTES = 100_000_000
"""The reference's limit on a JsonSoA answer."""

Bytes = bytes | memoryview


@dataclass(slots=True)
class Rendered:
    """Pieces of the data's text in each form asked for, in order."""

    wire: list[Bytes] = field(default_factory=list)
    canonical: list[Bytes] = field(default_factory=list)

    def extend(self, other: Rendered) -> None:
        self.wire.extend(other.wire)
        self.canonical.extend(other.canonical)


class DataWriter:
    """Writes one answer's ``data`` value; ``wire`` and ``canonical`` say which forms. Each
    batch is ``split`` into chunks, each chunk ``render``-ed (in any thread) and ``place``-d in
    order, then ``finish`` closes the value (``protocol.query.response`` drives the steps)."""

    def __init__(
        self,
        data_format: DataFormat,
        *,
        wire: bool = True,
        canonical: bool = False,
        soa_limit: int = MAX_SOA_BYTES,
        schema_order: bool = False,
    ) -> None:
        """``schema_order``: the wire form's objects keep their keys in schema order (the
        canonical form, hashed, always sorts them)."""
        self.data_format = data_format
        self._styles: list[tuple[str, Style]] = []
        arrays = data_format is DataFormat.JSON_AOA
        if wire:
            wire_style = Style(canonical=False, struct_arrays=arrays, schema_order=schema_order)
            self._styles.append(("wire", wire_style))
        if canonical:
            self._styles.append(("canonical", Style(canonical=True, struct_arrays=arrays)))
        self._soa_limit = soa_limit
        self._opened = False
        self._first_row = True
        self._columns: list[str] | None = None
        self._soa: dict[str, list[list[Bytes]]] = {name: [] for name, _ in self._styles}
        self._soa_size = 0

    def split(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """``batch`` cut into the chunks ``render`` takes (bounding its temporary arrays).
        Called for each batch in order: JsonSoA takes its columns from the first."""
        if self.data_format is DataFormat.JSON_SOA and self._columns is None:
            self._columns = list(batch.schema.names)
            for name, _ in self._styles:
                self._soa[name] = [[] for _ in self._columns]
        step = _chunk_rows(batch)
        return [batch.slice(start, step) for start in range(0, batch.num_rows, step)]

    def render(self, chunk: pa.RecordBatch) -> Rendered:
        """The text of one of ``split``'s chunks, whatever came before it (JsonAoS and JsonAoA
        rows each with a leading comma, JsonSoA's columns each comma-separated): it reads no
        state, so successive chunks may be rendered at once in several threads; ``place``
        puts them in order."""
        if self.data_format is DataFormat.JSON_SOA:
            return self._soa_columns(chunk)
        return self._rows(chunk)

    def place(self, rendered: Rendered) -> Rendered:
        """The text of a rendered chunk where it follows those placed before (JsonSoA's kept
        for ``finish``); chunks are placed in order."""
        if self.data_format is DataFormat.JSON_SOA:
            self._collect(rendered)
            return Rendered()
        out = self._open()
        if rendered.wire or rendered.canonical:
            for name, _ in self._styles:
                pieces = getattr(rendered, name)
                if self._first_row:
                    pieces[0] = pieces[0][1:]
                getattr(out, name).extend(pieces)
            self._first_row = False
        return out

    def finish(self) -> Rendered:
        """The closing text (all of it, for JsonSoA)."""
        out = self._open()
        if self.data_format is not DataFormat.JSON_SOA:
            for name, _ in self._styles:
                getattr(out, name).append(b"]")
            return out
        names = self._columns or []
        for name, style in self._styles:
            order = object_layout(names, style)
            pieces = getattr(out, name)
            for position, index in enumerate(order):
                key = object_key(names[index], style).encode()
                pieces.append((b"," if position else b"") + key + b"[")
                column = self._soa[name][index]
                for number, chunk in enumerate(column):
                    pieces += [b",", chunk] if number else [chunk]
                pieces.append(b"]")
            pieces.append(b"}")
        return out

    def _open(self) -> Rendered:
        out = Rendered()
        if not self._opened:
            self._opened = True
            opening = b"{" if self.data_format is DataFormat.JSON_SOA else b"["
            for name, _ in self._styles:
                getattr(out, name).append(opening)
        return out

    def _rows(self, chunk: pa.RecordBatch) -> Rendered:
        out = Rendered()
        if chunk.num_rows == 0:
            return out
        if chunk.num_rows <= SMALL_ROWS and self._small_rows(chunk, out):
            return out
        texts = self._texts(chunk)
        names = chunk.schema.names
        for name, style in self._styles:
            columns = texts[name]
            pieces: list[Piece]
            if self.data_format is DataFormat.JSON_AOA:
                pieces = [",["]
                for index, column in enumerate(columns):
                    pieces += [",", *column] if index else column
                pieces.append("]")
            else:
                pieces = [",{"]
                for position, index in enumerate(object_layout(names, style)):
                    pieces += [("," if position else "") + object_key(names[index], style)]
                    pieces += columns[index]
                pieces.append("}")
            rows = _join_rows(pieces, chunk.num_rows)
            getattr(out, name).append(data_bytes(rows))
        return out

    def _small_rows(self, chunk: pa.RecordBatch, out: Rendered) -> bool:
        """A few rows of plain columns written value by value (``render.small``), as
        ``_rows`` writes them; ``False`` (nothing written) when a column needs the vectorized
        path."""
        names = chunk.schema.names
        arrays = self.data_format is DataFormat.JSON_AOA
        rendered = []
        for name, style in self._styles:
            columns = []
            for index in range(len(names)):
                texts = small_texts(chunk.column(index), canonical=style.canonical)
                if texts is None:
                    return False
                columns.append(texts)
            rendered.append((name, style, columns))
        for name, style, columns in rendered:
            order = list(range(len(names))) if arrays else object_layout(names, style)
            if arrays:
                keys = ["" for _ in order]
                opening, closing = ",[", "]"
            else:
                keys = [object_key(names[index], style) for index in order]
                opening, closing = ",{", "}"
            pairs = list(zip(keys, [columns[index] for index in order], strict=True))
            body = "".join(
                opening + ",".join(key + column[row] for key, column in pairs) + closing
                for row in range(chunk.num_rows)
            ).encode()
            getattr(out, name).append(body)
        return True

    def _texts(self, chunk: pa.RecordBatch) -> dict[str, list[pa.Array]]:
        """Each column's texts per form, as pieces of a row join (``columns.column_pieces``);
        columns the forms write alike are rendered once."""
        texts: dict[str, list[list[Piece]]] = {name: [] for name, _ in self._styles}
        for column in chunk.columns:
            shared = (
                None if differs_by_style(column.type) else column_pieces(column, self._styles[0][1])
            )
            for name, style in self._styles:
                texts[name].append(shared if shared is not None else column_pieces(column, style))
        return texts

    def _soa_columns(self, chunk: pa.RecordBatch) -> Rendered:
        """Each column's texts comma-separated, per form."""
        texts = self._texts(chunk)
        out = Rendered()
        for name, _ in self._styles:
            getattr(out, name).extend(_comma_separated(column) for column in texts[name])
        return out

    def _collect(self, rendered: Rendered) -> None:
        for name, _ in self._styles:
            for index, body in enumerate(getattr(rendered, name)):
                self._soa[name][index].append(body)
                if name == self._styles[0][0]:
                    self._soa_size += len(body)
        if self._soa_size >= self._soa_limit:
            raise DataTooLargeError(
                f"the answer is larger than {self._soa_limit} bytes, the limit of JsonSoA "
                "(which cannot be streamed); ask for JsonAoS or JsonAoA, or fewer rows"
            )


def _chunk_rows(batch: pa.RecordBatch) -> int:
    """Rows of ``batch`` rendered at once (``ROWS_PER_CHUNK``, fewer for a wide batch)."""
    columns: int = max(batch.num_columns, 1)
    return max(1, min(ROWS_PER_CHUNK, VALUES_PER_CHUNK // columns))


def _comma_separated(pieces: list[Piece]) -> Bytes:
    """A column's texts separated by commas: a column rendered whole by one Arrow
    ``binary_join`` over it as one list, a column in pieces by the row join with a comma
    piece (the last comma cut off)."""
    if len(pieces) == 1 and isinstance(pieces[0], pa.Array):
        listed = pa.LargeListArray.from_arrays(pa.array([0, len(pieces[0])], pa.int64()), pieces[0])
        return data_bytes(pc.binary_join(listed, pa.scalar(",", TEXT)))
    return data_bytes(join(merged_constants([*pieces, ","])))[:-1]


def _join_rows(pieces: list[Piece], rows: int) -> pa.Array:
    """Row-wise concatenation, adjacent constant texts merged first."""
    merged = merged_constants(pieces)
    if len(merged) == 1 and isinstance(merged[0], str):
        return constant(merged[0], rows)  # a batch without columns
    return join(merged)
