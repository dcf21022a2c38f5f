"""A FlatBuffers builder that lays bytes out exactly as the Rust ``flatbuffers`` crate does.

Block hashes are computed over the builder's output, so every layout decision must match the
reference's builder: back-to-front writing, alignment padding, a table's soffset placeholder
followed by its vtable, vtables deduplicated by their complete bytes (including the table's inline
size, which the stock Python builder ignores), default-valued scalars skipped, and the root offset
aligned to the largest alignment used. The buffer is a list of chunks written from the end backwards
and joined once, which is several times faster than the stock builder's byte-by-byte prepends.
"""

from __future__ import annotations

from struct import Struct

from protocol.errors import EncodeError
from protocol.model.timestamp import Timestamp

_U32 = Struct("<I").pack
_I32 = Struct("<i").pack
_U32_UNPACK = Struct("<I").unpack_from
_TIMESTAMP = Struct("<iHxxII").pack
_VTABLES = [Struct(f"<{n + 2}H").pack for n in range(64)]
_ZEROS = bytes(8)
_PACKERS: dict[str, object] = {}


def packer(code: str):
    """The little-endian ``struct`` packer for a scalar code (``Q``, ``i``, ``?``, ...)."""
    pack = _PACKERS.get(code)
    if pack is None:
        pack = _PACKERS[code] = Struct("<" + code).pack
    return pack


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
        pad = -(self._size + n + 1) & 3
        self._chunks.append(_U32(n) + data + _ZEROS[: pad + 1])
        self._size += 4 + n + 1 + pad
        return self._size

    def byte_vector(self, data: bytes) -> int:
        """A ``[ubyte]`` vector; returns its offset."""
        n = len(data)
        if self._min_align < 4:
            self._min_align = 4
        pad = -(self._size + n) & 3
        self._chunks.append(_U32(n) + data + _ZEROS[:pad] if pad else _U32(n) + data)
        self._size += 4 + n + pad
        return self._size

    def embedded_buffer(self, data: bytes) -> int:
        """Copy a finished FlatBuffer in whole, 8-byte aligned; returns the offset of its root table.

        FlatBuffers offsets are relative, so a buffer stays valid wherever it is copied to.
        """
        self._pad(len(data), 8)
        self._chunks.append(data)
        self._size += len(data)
        (root,) = _U32_UNPACK(data, 0)
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

    def add_scalar(self, slot: int, pack, size: int, value: object) -> None:
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
        except Exception as error:  # struct.error: out-of-range or mistyped value
            raise EncodeError(f"value {value!r} does not fit a {size}-byte FlatBuffers scalar: {error}") from None
        total += size
        self._size = total
        self._fields.append((slot, total))

    def add_scalar_default(self, slot: int, pack, size: int, value: object) -> None:
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
