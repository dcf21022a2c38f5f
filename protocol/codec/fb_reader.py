"""Bounds-checked reading of FlatBuffers tables from untrusted bytes.

The Python ``flatbuffers`` runtime trusts its input (no verifier), and blocks arrive from peers we
do not trust, so every offset, length and vtable is checked here before it is followed. A work
budget proportional to the buffer size stops buffers whose offsets point many times at the same
objects from making decoding explode.
"""

from __future__ import annotations

from struct import Struct, error as StructError

from protocol.codec.invalid import Invalid
from protocol.model.timestamp import Timestamp

MAX_DEPTH = 64
"""Deepest nesting of tables accepted (a DataType nests one table per level)."""

_U8 = Struct("<B").unpack_from
_U16X2 = Struct("<HH").unpack_from
_U32 = Struct("<I").unpack_from
_I32 = Struct("<i").unpack_from
_TIMESTAMP = Struct("<iHxxII").unpack_from
_VTABLES = [Struct(f"<{n}H").unpack_from for n in range(64)]
_SCALARS: dict[str, object] = {}

__all__ = ["DECODE_FAILURES", "MAX_DEPTH", "Invalid", "Reader"]

DECODE_FAILURES = (StructError, IndexError, ValueError, UnicodeDecodeError, OverflowError, RecursionError)
"""Low-level failures a malformed buffer can provoke; decoders turn them into ``Invalid``."""


class Reader:
    """Reads one buffer; positions are absolute byte indexes into it."""

    __slots__ = ("buf", "size", "budget")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.size = len(buf)
        self.budget = self.size // 4 + 1

    def _target(self, pos: int) -> int:
        """Follow the uoffset stored at ``pos``."""
        if pos + 4 > self.size:
            raise Invalid("", f"offset at {pos} is past the end of the buffer")
        target = pos + _U32(self.buf, pos)[0]
        if target + 4 > self.size:
            raise Invalid("", f"offset at {pos} points past the end of the buffer")
        return target

    def table(self, pos: int) -> int:
        """The position of the table referenced by the uoffset at ``pos``."""
        return self._target(pos)

    def fields(self, table: int, count: int) -> tuple[int, ...]:
        """Offsets of the table's first ``count`` fields from the table start (0 = absent)."""
        self.budget -= 1
        if self.budget < 0:
            raise Invalid("", "buffer references more objects than it can hold")
        buf = self.buf
        vtable = table - _I32(buf, table)[0]
        if vtable < 0 or vtable + 4 > self.size:
            raise Invalid("", f"table at {table} has its vtable outside the buffer")
        vtable_len, object_len = _U16X2(buf, vtable)
        if vtable_len < 4 or vtable_len & 1 or vtable + vtable_len > self.size:
            raise Invalid("", f"table at {table} has a malformed vtable")
        if object_len < 4 or table + object_len > self.size:
            raise Invalid("", f"table at {table} extends past the end of the buffer")
        present = (vtable_len - 4) >> 1
        if present > count:
            present = count
        if not present:
            return (0,) * count
        offsets = _VTABLES[present](buf, vtable + 4)
        if max(offsets) >= object_len:
            raise Invalid("", f"table at {table} has a field outside its inline data")
        if present < count:
            offsets = offsets + (0,) * (count - present)
        return offsets

    def u8(self, pos: int) -> int:
        return self.buf[pos]

    def scalar(self, code: str, size: int, pos: int) -> int | bool:
        unpack = _SCALARS.get(code)
        if unpack is None:
            unpack = _SCALARS[code] = Struct(code).unpack_from
        return unpack(self.buf, pos)[0]  # type: ignore[operator]

    def timestamp(self, pos: int) -> Timestamp:
        return Timestamp.from_fb_parts(*_TIMESTAMP(self.buf, pos))

    def bytes(self, pos: int) -> bytes:
        start = self._target(pos)
        length = _U32(self.buf, start)[0]
        if start + 4 + length > self.size:
            raise Invalid("", f"vector at {start} of {length} bytes extends past the end of the buffer")
        return self.buf[start + 4 : start + 4 + length]

    def string(self, pos: int) -> str:
        start = self._target(pos)
        length = _U32(self.buf, start)[0]
        end = start + 4 + length
        if end >= self.size or self.buf[end] != 0:
            raise Invalid("", f"string at {start} of {length} bytes is not terminated inside the buffer")
        return self.buf[start + 4 : end].decode()

    def offsets(self, pos: int) -> range:
        """Positions of the uoffset elements of the vector referenced at ``pos``."""
        start = self._target(pos)
        count = _U32(self.buf, start)[0]
        if start + 4 + 4 * count > self.size:
            raise Invalid("", f"vector at {start} of {count} offsets extends past the end of the buffer")
        self.budget -= count
        if self.budget < 0:
            raise Invalid("", "buffer references more objects than it can hold")
        return range(start + 4, start + 4 + 4 * count, 4)
