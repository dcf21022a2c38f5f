"""A FlatBuffers builder that lays bytes out exactly as the Rust ``flatbuffers`` crate does.

Block hashes are computed over the builder's output, so every layout decision must match the
reference's builder: back-to-front writing, alignment padding, a table's soffset placeholder
followed by its vtable, vtables deduplicated by their complete bytes (including the table's inline
size, which the stock Python builder ignores), default-valued scalars skipped, and the root offset
aligned to the largest alignment used. The buffer is a list of chunks written from the end backwards
and joined once, which is several times faster than the stock builder's byte-by-byte prepends.

Generated encoders write a whole table with one ``table`` call: where each field lands depends
only on which fields are present and on the buffer size modulo 8, so ``TableLayout`` works that
out once per (presence, alignment) pair and the table's inline bytes become a single
``struct.pack``. The field-by-field methods (``start_table``, ``add_*``, ``end_table``) lay out
the same bytes and remain for hand-built buffers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from struct import Struct, calcsize
from struct import error as StructError
from typing import Any

from protocol.errors import EncodeError
from protocol.model.timestamp import Timestamp

_U32 = Struct("<I").pack
_I32 = Struct("<i").pack
_U32_UNPACK = Struct("<I").unpack_from
_TIMESTAMP = Struct("<iHxxII").pack
_VTABLES = [Struct(f"<{n + 2}H").pack for n in range(64)]
_ZEROS = bytes(8)
_PADDING = (b"", b"\0", b"\0\0", b"\0\0\0")
_TERMINATORS = (b"\0", b"\0\0", b"\0\0\0", b"\0\0\0\0")
_SHORT_LENGTHS = [_U32(n) for n in range(256)]
"""Length prefixes of short vectors and strings (hashes, names), packed once."""
Packer = Callable[..., bytes]
"""``struct.Struct(code).pack``: values in, little-endian bytes out."""
_PACKERS: dict[str, Packer] = {}

OFFSET = "offset"
"""Field kind of a ``TableLayout``: a uoffset to an object written earlier (value: its offset)."""
TIMESTAMP = "timestamp"
"""Field kind of a ``TableLayout``: the Timestamp struct (value: its four ``to_fb_parts``)."""
_TIMESTAMP_CODE = "iHxxII"


def packer(code: str) -> Packer:
    """The little-endian ``struct`` packer for a scalar code (``Q``, ``i``, ``?``, ...)."""
    pack = _PACKERS.get(code)
    if pack is None:
        pack = _PACKERS[code] = Struct("<" + code).pack
    return pack


class TableLayout:
    """Where the fields of one table type land, worked out once per presence pattern and alignment.

    ``fields`` lists ``(slot, kind)`` in ascending slot order; ``kind`` is ``OFFSET``, ``TIMESTAMP``
    or a ``struct`` scalar code (``Q``, ``i``, ``?``, ...; a union is its ``B`` type tag at
    ``slot - 1`` followed by an ``OFFSET``). ``Builder.table`` takes a presence mask (bit ``i``:
    ``fields[i]`` is written) and the values in the order their bytes lie in the buffer, i.e. from
    the last field to the first, one value per field (four for a timestamp), absent ones included
    as placeholders.
    """

    __slots__ = ("name", "fields", "_plans")

    _MAX_PLANS = 4096
    """Plans kept per table type; a block uses a handful of presence patterns."""

    def __init__(self, name: str, fields: tuple[tuple[int, str], ...]) -> None:
        self.name = name
        self.fields = fields
        self._plans: dict[int, tuple[Any, ...]] = {}

    def plan(self, mask: int, start: int) -> tuple[Any, ...]:
        """The layout of the fields in ``mask`` written when the buffer size is ``start`` mod 8:
        ``(pack, pick, offsets, table_rel, vtable, vtable_len, min_align)``, where ``pick`` selects
        the present values (``None``: all are), ``offsets`` lists ``(value index, position - start)``
        of the uoffsets to resolve, and ``table_rel`` is the table's position minus ``start``.

        Mirrors ``add_offset`` / ``add_timestamp`` / ``add_scalar`` and ``end_table``; a test checks
        the two paths give the same bytes."""
        arity = [4 if kind == TIMESTAMP else 1 for _, kind in self.fields]
        value_at = [sum(arity[i + 1 :]) for i in range(len(arity))]  # values come last field first
        size = start
        min_align = 1
        written = []  # (field index, slot, struct code, padding written before it, its position)
        for index, (slot, kind) in enumerate(self.fields):
            if not mask >> index & 1:
                continue
            if kind == OFFSET:
                width, align, code = 4, 4, "I"
            elif kind == TIMESTAMP:
                width, align, code = 16, 4, _TIMESTAMP_CODE
                min_align = max(min_align, align)
            else:
                width = align = calcsize("<" + kind)
                code = kind
                min_align = max(min_align, align)
            pad = -size & (align - 1)
            size += pad + width
            written.append((index, slot, code, pad, size))
        end_pad = -size & 3
        table = size + end_pad + 4
        nslots = written[-1][1] + 1 if written else 0
        entries = [0] * nslots
        for _, slot, _, _, position in written:
            entries[slot] = table - position
        vtable_len = 4 + 2 * nslots
        vtable = _VTABLES[nslots](vtable_len, table - start, *entries)
        in_buffer = written[::-1]  # written back to front: the last field written comes first
        fmt = "<i" + "x" * end_pad + "".join(code + "x" * pad for _, _, code, pad, _ in in_buffer)
        picked = [value_at[index] + k for index, *_ in in_buffer for k in range(arity[index])]
        pick = None if picked == list(range(sum(arity))) else _picker(picked)
        offsets = tuple(
            (value_at[index], position - start)
            for index, _, code, _, position in written
            if self.fields[index][1] == OFFSET
        )
        plan = (Struct(fmt).pack, pick, offsets, table - start, vtable, vtable_len, min_align)
        if len(self._plans) < self._MAX_PLANS:
            self._plans[mask << 3 | start] = plan
        return plan


def _picker(indexes: list[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """A function returning the values at ``indexes`` as a sequence (``itemgetter`` returns a bare
    value for one index)."""
    if len(indexes) > 1:
        return itemgetter(*indexes)
    return lambda values: [values[i] for i in indexes]


class Builder:
    """Builds one buffer; offsets are distances from the end of the buffer, as in the reference."""

    __slots__ = ("_chunks", "_size", "_min_align", "_fields", "_table_tail", "_vtables")

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._min_align = 1
        self._fields: list[tuple[int, int]] = []
        self._table_tail = -1
        self._vtables: dict[bytes, int] = {}

    def _pad(self, length: int, alignment: int) -> None:
        if alignment > self._min_align:
            self._min_align = alignment
        pad = -(self._size + length) & (alignment - 1)
        if pad:
            self._chunks.append(_ZEROS[:pad])
            self._size += pad

    def string(self, text: str) -> int:
        """A zero-terminated UTF-8 string; returns its offset."""
        try:
            data = text.encode()
        except UnicodeEncodeError as error:
            raise EncodeError(f"string {text[:40]!r} is not valid Unicode: {error}") from None
        return self.byte_string(data)

    def byte_string(self, data: bytes) -> int:
        n = len(data)
        if self._min_align < 4:
            self._min_align = 4
        size = self._size + 4 + n + 1
        pad = -size & 3
        self._chunks.append((_SHORT_LENGTHS[n] if n < 256 else _U32(n)) + data + _TERMINATORS[pad])
        self._size = size = size + pad
        return size

    def byte_vector(self, data: bytes) -> int:
        """A ``[ubyte]`` vector; returns its offset."""
        return self.byte_vector_of(b"", data)

    def byte_vector_of(self, head: bytes, tail: bytes) -> int:
        """The ``[ubyte]`` vector of ``head + tail`` (say, a multihash's header and digest)."""
        n = len(head) + len(tail)
        if self._min_align < 4:
            self._min_align = 4
        size = self._size + 4 + n
        pad = -size & 3
        self._chunks.append(
            (_SHORT_LENGTHS[n] if n < 256 else _U32(n)) + head + tail + _PADDING[pad]
        )
        self._size = size = size + pad
        return size

    def embedded_buffer(self, data: bytes) -> int:
        """Copy a finished FlatBuffer in whole, 8-byte aligned; returns the offset of its root table.

        FlatBuffers offsets are relative, so a buffer stays valid wherever it is copied to.
        """
        self._pad(len(data), 8)
        self._chunks.append(data)
        self._size += len(data)
        root: int = _U32_UNPACK(data, 0)[0]
        return self._size - root

    def offset_vector(self, offsets: list[int]) -> int:
        """A vector of offsets to tables or strings already written; returns its offset."""
        n = len(offsets)
        self._pad(0, 4)
        end = self._size + 4 * n
        parts = [_U32(n)]
        parts += [_U32(end - 4 * i - target) for i, target in enumerate(offsets)]
        self._chunks.append(b"".join(parts))
        self._size = end + 4
        return self._size

    def table(self, layout: TableLayout, mask: int, values: Sequence[Any]) -> int:
        """Write a whole table (fields, soffset and, unless an identical one exists, vtable) with
        the bytes ``start_table``, ``add_*`` and ``end_table`` would write; returns its offset."""
        size = self._size
        plan = layout._plans.get(mask << 3 | size & 7) or layout.plan(mask, size & 7)
        pack, pick, offsets, table_rel, vtable, vtable_len, min_align = plan
        if offsets:
            resolved = list(values)
            for index, position in offsets:
                resolved[index] = size + position - resolved[index]
            values = resolved
        if pick is not None:
            values = pick(values)
        table: int = size + table_rel
        existing = self._vtables.get(vtable)
        try:
            if existing is None:
                self._chunks.append(pack(vtable_len, *values))
                self._chunks.append(vtable)
                self._size = table + vtable_len
                self._vtables[vtable] = self._size
            else:
                self._chunks.append(pack(existing - table, *values))
                self._size = table
        except StructError as error:  # out-of-range or mistyped scalar
            raise EncodeError(
                f"a field of {layout.name} does not fit its FlatBuffers type: {error}"
            ) from None
        if min_align > self._min_align:
            self._min_align = min_align
        return table

    def start_table(self) -> None:
        self._fields = []
        self._table_tail = self._size

    def add_offset(self, slot: int, target: int) -> None:
        """Store a reference to an object written earlier (string, vector or table)."""
        size = self._size
        pad = -size & 3
        if pad:
            self._chunks.append(_ZEROS[:pad])
            size += pad
        size += 4
        self._chunks.append(_U32(size - target))
        self._size = size
        self._fields.append((slot, size))

    def add_union(self, slot: int, union: tuple[int, int]) -> None:
        """A union field: its type tag in ``slot - 1``, its value offset in ``slot``."""
        tag, target = union
        self._chunks.append(bytes((tag,)))
        self._size += 1
        self._fields.append((slot - 1, self._size))
        self.add_offset(slot, target)

    def add_scalar(self, slot: int, pack: Packer, size: int, value: object) -> None:
        """A scalar field written even when it equals the default (optional ``= null`` scalars);
        ``pack`` comes from ``packer(code)``."""
        if size > self._min_align:
            self._min_align = size
        total = self._size
        pad = -total & (size - 1)
        if pad:
            self._chunks.append(_ZEROS[:pad])
            total += pad
        try:
            self._chunks.append(pack(value))
        except (StructError, OverflowError) as error:  # out-of-range or mistyped value
            raise EncodeError(
                f"value {value!r} does not fit a {size}-byte FlatBuffers scalar: {error}"
            ) from None
        total += size
        self._size = total
        self._fields.append((slot, total))

    def add_scalar_default(self, slot: int, pack: Packer, size: int, value: object) -> None:
        """A scalar field skipped when it equals the schema default (zero / false / first enum value)."""
        if value:
            self.add_scalar(slot, pack, size, value)

    def add_timestamp(self, slot: int, value: Timestamp) -> None:
        self._pad(16, 4)
        self._chunks.append(_TIMESTAMP(*value.to_fb_parts()))
        self._size += 16
        self._fields.append((slot, self._size))

    def end_table(self) -> int:
        """Write the table's soffset and, unless an identical one exists, its vtable.

        Fields are added in ascending slot order, so the last one sets the vtable's length.
        """
        size = self._size
        pad = -size & 3
        if pad:
            self._chunks.append(_ZEROS[:pad])
            size += pad
        table = size + 4
        fields = self._fields
        if fields:
            nslots = fields[-1][0] + 1
            entries = [0] * nslots
            for slot, position in fields:
                entries[slot] = table - position
        else:
            nslots = 0
            entries = []
        vtable_len = 4 + 2 * nslots
        vtable = _VTABLES[nslots](vtable_len, table - self._table_tail, *entries)
        existing = self._vtables.get(vtable)
        if existing is not None:
            self._chunks.append(_I32(existing - table))
            self._size = table
        else:
            self._chunks.append(_I32(vtable_len))
            self._chunks.append(vtable)
            self._size = table + vtable_len
            self._vtables[vtable] = self._size
        self._fields = []
        return table

    def finish(self, root: int) -> bytes:
        """Write the root offset (no file identifier) and return the finished buffer."""
        self._pad(4, self._min_align)
        self._chunks.append(_U32(self._size + 4 - root))
        self._size += 4
        self._chunks.reverse()
        return b"".join(self._chunks)
