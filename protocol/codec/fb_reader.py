"""Bounds-checked reading of FlatBuffers tables from untrusted bytes.

The Python ``flatbuffers`` runtime trusts its input (no verifier), and blocks arrive from peers we
do not trust, so every offset, length and vtable is checked here before it is followed. A work
budget proportional to the buffer size stops buffers whose offsets point many times at the same
objects from making decoding explode.

Decoding a chain calls these methods millions of times, so each one does its checks inline rather
than through shared helpers: a Python call costs as much as several comparisons.
"""

from __future__ import annotations

from struct import Struct
from struct import error as StructError

from protocol.codec.invalid import Invalid
from protocol.model.timestamp import Timestamp

MAX_DEPTH = 64
"""Deepest nesting of tables accepted (a DataType nests one table per level)."""

_U16X2 = Struct("<HH").unpack_from
_U32 = Struct("<I").unpack_from
_I32 = Struct("<i").unpack_from
_TIMESTAMP = Struct("<iHxxII").unpack_from
_VTABLES = [Struct(f"<{n}H").unpack_from for n in range(64)]
_ABSENT = [(0,) * n for n in range(64)]
_VTABLE_CACHES: list[dict[bytes, tuple[int, tuple[int, ...]]]] = [{} for _ in range(64)]
"""Per field count: the first ``4 + 2 * count`` bytes of a vtable -> (object size, field offsets).

Those bytes hold everything the vtable checks depend on, and a chain repeats a few dozen
vtables, so each distinct one is checked once per process instead of once per table read.
"""
_VTABLE_KEY_SIZES = [4 + 2 * n for n in range(64)]
_VTABLE_CACHE_LIMIT = 256
"""Distinct vtables kept per field count. Legitimate writers use a few presence patterns per table
type; a cache filled by hostile buffers is emptied and refills with what recurs."""
_from_fb_parts = Timestamp.from_fb_parts

__all__ = ["DECODE_FAILURES", "MAX_DEPTH", "Invalid", "Reader"]

DECODE_FAILURES = (
    StructError,
    IndexError,
    ValueError,
    UnicodeDecodeError,
    OverflowError,
    RecursionError,
)
"""Low-level failures a malformed buffer can provoke; decoders turn them into ``Invalid``."""


class Reader:
    """Reads one buffer; positions are absolute byte indexes into it."""

    __slots__ = ("buf", "size", "budget")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.size = len(buf)
        self.budget = self.size // 4 + 1

    def table(self, pos: int) -> int:
        """The position of the table referenced by the uoffset at ``pos``."""
        if pos + 4 > self.size:
            raise Invalid("", f"offset at {pos} is past the end of the buffer")
        target: int = pos + _U32(self.buf, pos)[0]
        if target + 4 > self.size:
            raise Invalid("", f"offset at {pos} points past the end of the buffer")
        return target

    def table_fields(self, pos: int, count: int) -> tuple[int, tuple[int, ...]]:
        """``table(pos)`` and ``fields(table, count)`` in one call (decoders read every table so)."""
        size = self.size
        if pos + 4 > size:
            raise Invalid("", f"offset at {pos} is past the end of the buffer")
        buf = self.buf
        table = pos + _U32(buf, pos)[0]
        if table + 4 > size:
            raise Invalid("", f"offset at {pos} points past the end of the buffer")
        self.budget -= 1
        if self.budget < 0:
            raise Invalid("", "buffer references more objects than it can hold")
        vtable = table - _I32(buf, table)[0]
        if vtable < 0:
            raise Invalid("", f"table at {table} has its vtable outside the buffer")
        entry = _VTABLE_CACHES[count].get(buf[vtable : vtable + _VTABLE_KEY_SIZES[count]])
        if entry is None:
            entry = self._vtable_entry(table, vtable, count)
        if table + entry[0] > size:
            raise Invalid("", f"table at {table} extends past the end of the buffer")
        return table, entry[1]

    def fields(self, table: int, count: int) -> tuple[int, ...]:
        """Offsets of the table's first ``count`` fields from the table start (0 = absent)."""
        self.budget -= 1
        if self.budget < 0:
            raise Invalid("", "buffer references more objects than it can hold")
        buf = self.buf
        vtable = table - _I32(buf, table)[0]
        if vtable < 0:
            raise Invalid("", f"table at {table} has its vtable outside the buffer")
        entry = _VTABLE_CACHES[count].get(buf[vtable : vtable + _VTABLE_KEY_SIZES[count]])
        if entry is None:
            entry = self._vtable_entry(table, vtable, count)
        if table + entry[0] > self.size:
            raise Invalid("", f"table at {table} extends past the end of the buffer")
        return entry[1]

    def _vtable_entry(self, table: int, vtable: int, count: int) -> tuple[int, tuple[int, ...]]:
        """Check the vtable of the table at ``table``: (object size, first ``count`` field offsets).

        Cached under its first ``4 + 2 * count`` bytes when those lie inside the buffer and the
        vtable is no longer (so they decide every check but the table's own extent).
        """
        buf = self.buf
        size = self.size
        if vtable + 4 > size:
            raise Invalid("", f"table at {table} has its vtable outside the buffer")
        vtable_len, object_len = _U16X2(buf, vtable)
        if vtable_len < 4 or vtable_len & 1 or vtable + vtable_len > size:
            raise Invalid("", f"table at {table} has a malformed vtable")
        if object_len < 4:
            raise Invalid("", f"table at {table} extends past the end of the buffer")
        present = (vtable_len - 4) >> 1
        if present >= count:
            offsets = _VTABLES[count](buf, vtable + 4)
        elif present:
            offsets = _VTABLES[present](buf, vtable + 4) + _ABSENT[count - present]
        else:
            offsets = _ABSENT[count]
        if offsets and max(offsets) >= object_len:
            raise Invalid("", f"table at {table} has a field outside its inline data")
        entry = (object_len, offsets)
        key_size = _VTABLE_KEY_SIZES[count]
        cache = _VTABLE_CACHES[count]
        if vtable_len <= key_size and vtable + key_size <= size:
            if len(cache) >= _VTABLE_CACHE_LIMIT:
                cache.clear()
            cache[buf[vtable : vtable + key_size]] = entry
        return entry

    def timestamp(self, pos: int) -> Timestamp:
        return _from_fb_parts(*_TIMESTAMP(self.buf, pos))

    def bytes(self, pos: int) -> bytes:
        start = self.table(pos)  # a vector is referenced as a table is
        buf = self.buf
        end = start + 4 + _U32(buf, start)[0]
        if end > self.size:
            raise Invalid(
                "",
                f"vector at {start} of {end - start - 4} bytes extends past the end of the buffer",
            )
        return buf[start + 4 : end]

    def string(self, pos: int) -> str:
        start = self.table(pos)
        buf = self.buf
        end = start + 4 + _U32(buf, start)[0]
        if end >= self.size or buf[end] != 0:
            raise Invalid(
                "",
                f"string at {start} of {end - start - 4} bytes is not terminated inside the buffer",
            )
        return buf[start + 4 : end].decode()

    def offsets(self, pos: int) -> range:
        """Positions of the uoffset elements of the vector referenced at ``pos``."""
        start = self.table(pos)
        count = _U32(self.buf, start)[0]
        if start + 4 + 4 * count > self.size:
            raise Invalid(
                "", f"vector at {start} of {count} offsets extends past the end of the buffer"
            )
        self.budget -= count
        if self.budget < 0:
            raise Invalid("", "buffer references more objects than it can hold")
        return range(start + 4, start + 4 + 4 * count, 4)
