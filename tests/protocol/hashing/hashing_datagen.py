"""Seeded test tables for the logical hash, one per golden vector.

Each case is rebuilt from its seed with NumPy's PCG64 generator, so the golden hashes in
``test_logical_hash_golden.py`` (computed once by the reference arrow-digest crate over exactly
these batches) keep describing the same data.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pyarrow as pa

Case = tuple[pa.Schema, list[pa.RecordBatch]]

_ALPHABET = np.array(list("abcxyz ABC019_-é€😀"))


def _mask(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    return rng.random(n) < rate


def _split(table: pa.Table, rows: int) -> list[pa.RecordBatch]:
    """Cut ``table`` into batches of ``rows`` rows (as slices, so offsets are exercised)."""
    combined = table.combine_chunks()
    return [
        batch
        for start in range(0, combined.num_rows, rows)
        for batch in combined.slice(start, rows).to_batches()
    ]


def _strings(rng: np.random.Generator, n: int, max_len: int) -> list[str]:
    lengths = rng.integers(0, max_len + 1, n)
    chars = _ALPHABET[rng.integers(0, len(_ALPHABET), int(lengths.sum()))]
    ends = np.cumsum(lengths)
    return ["".join(chars[end - length : end]) for end, length in zip(ends, lengths, strict=True)]


def _ints(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def fixed_width(seed: int = 1) -> Case:
    """Every fixed-width type, 20% nulls, 3000 rows in batches of 700."""
    rng = np.random.default_rng(seed)
    n = 3000
    columns: dict[str, pa.Array] = {}
    for dtype, arrow_type in [
        (np.int8, pa.int8()),
        (np.int16, pa.int16()),
        (np.int32, pa.int32()),
        (np.int64, pa.int64()),
        (np.uint8, pa.uint8()),
        (np.uint16, pa.uint16()),
        (np.uint32, pa.uint32()),
        (np.uint64, pa.uint64()),
    ]:
        columns[str(arrow_type)] = pa.array(
            _ints(rng, n, dtype), arrow_type, mask=_mask(rng, n, 0.2)
        )
    columns["float16"] = pa.array(rng.normal(size=n).astype(np.float16), mask=_mask(rng, n, 0.2))
    columns["float32"] = pa.array(rng.normal(size=n).astype(np.float32), mask=_mask(rng, n, 0.2))
    columns["float64"] = pa.array(rng.normal(size=n) * 1e6, mask=_mask(rng, n, 0.2))
    for name, arrow_type, bound, step in [
        ("decimal32", pa.decimal32(7, 2), 99_999, 1),
        ("decimal64", pa.decimal64(15, 3), 10**11, 1),
        ("decimal128", pa.decimal128(38, 10), 10**18, 1),
        ("decimal256", pa.decimal256(60, -3), 10**18, 1000),
    ]:
        units = rng.integers(-bound, bound, n, dtype=np.int64) // step * step
        values = [Decimal(int(unit)).scaleb(-arrow_type.scale) for unit in units]
        columns[name] = pa.array(values, arrow_type, mask=_mask(rng, n, 0.2))
    columns["date32"] = pa.array(
        rng.integers(-20_000, 40_000, n, dtype=np.int32), pa.date32(), mask=_mask(rng, n, 0.2)
    )
    columns["date64"] = pa.array(
        rng.integers(-20_000, 40_000, n, dtype=np.int64) * 86_400_000,
        pa.date64(),
        mask=_mask(rng, n, 0.2),
    )
    columns["time32s"] = pa.array(
        rng.integers(0, 86_400, n, dtype=np.int32), pa.time32("s"), mask=_mask(rng, n, 0.2)
    )
    columns["time32ms"] = pa.array(
        rng.integers(0, 86_400_000, n, dtype=np.int32), pa.time32("ms"), mask=_mask(rng, n, 0.2)
    )
    columns["time64us"] = pa.array(
        rng.integers(0, 86_400_000_000, n), pa.time64("us"), mask=_mask(rng, n, 0.2)
    )
    columns["time64ns"] = pa.array(
        rng.integers(0, 86_400_000_000_000, n), pa.time64("ns"), mask=_mask(rng, n, 0.2)
    )
    for name, unit, zone in [
        ("ts_s", "s", None),
        ("ts_ms_utc", "ms", "UTC"),
        ("ts_us_offset", "us", "+01:00"),
        ("ts_ns_named", "ns", "America/New_York"),
    ]:
        ticks = rng.integers(0, 2**40, n, dtype=np.int64)
        columns[name] = pa.array(ticks, pa.timestamp(unit, zone), mask=_mask(rng, n, 0.2))
    table = pa.table(columns)
    return table.schema, _split(table, 700)


def booleans(seed: int = 2) -> Case:
    """Booleans with nulls, batches starting at bit offsets that are not multiples of 8."""
    rng = np.random.default_rng(seed)
    n = 1001
    table = pa.table(
        {
            "flag": pa.array(rng.random(n) < 0.5, mask=_mask(rng, n, 0.3)),
            "dense": pa.array(rng.random(n) < 0.5),
        }
    )
    return table.schema, _split(table, 333)


def binary_like(seed: int = 3) -> Case:
    """Every string and binary encoding, empty values and multi-byte UTF-8, 15% nulls."""
    rng = np.random.default_rng(seed)
    n = 2000
    columns: dict[str, pa.Array] = {}
    for name, arrow_type in [
        ("utf8", pa.string()),
        ("large_utf8", pa.large_string()),
        ("utf8_view", pa.string_view()),
    ]:
        columns[name] = pa.array(_strings(rng, n, 40), arrow_type, mask=_mask(rng, n, 0.15))
    for name, arrow_type in [
        ("binary", pa.binary()),
        ("large_binary", pa.large_binary()),
        ("binary_view", pa.binary_view()),
    ]:
        values = [s.encode() for s in _strings(rng, n, 30)]
        columns[name] = pa.array(values, arrow_type, mask=_mask(rng, n, 0.15))
    fixed = rng.integers(0, 256, (n, 5), dtype=np.uint8)
    columns["fixed_size_binary"] = pa.array(
        [row.tobytes() for row in fixed], pa.binary(5), mask=_mask(rng, n, 0.15)
    )
    table = pa.table(columns)
    return table.schema, _split(table, 900)


def _list_of(
    rng: np.random.Generator, n: int, items: pa.Array, max_len: int, null_rate: float
) -> pa.Array:
    """A list array over ``items`` (consumed front to back) with random lengths and null lists."""
    lengths = rng.integers(0, max_len + 1, n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(
        pa.array(offsets), items.slice(0, int(offsets[-1])), mask=pa.array(_mask(rng, n, null_rate))
    )


def lists(seed: int = 4) -> Case:
    """Lists, large lists, fixed-size lists and lists of lists, with null lists and null items."""
    rng = np.random.default_rng(seed)
    n = 1500
    ints = pa.array(_ints(rng, 6 * n, np.int32), mask=_mask(rng, 6 * n, 0.2))
    words = pa.array(_strings(rng, 6 * n, 12), mask=_mask(rng, 6 * n, 0.2))
    flags = pa.array(rng.random(6 * n) < 0.5, mask=_mask(rng, 6 * n, 0.2))
    shorts = pa.array(_ints(rng, 40 * n, np.int16), mask=_mask(rng, 40 * n, 0.1))
    inner = _list_of(rng, 8 * n, shorts, 4, 0.2)
    fixed_values = pa.array(rng.normal(size=3 * n), mask=_mask(rng, 3 * n, 0.2))
    table = pa.table(
        {
            "ints": _list_of(rng, n, ints, 5, 0.2),
            "words": _list_of(rng, n, words, 5, 0.2).cast(pa.large_list(pa.string())),
            "flags": _list_of(rng, n, flags, 5, 0.0),
            "nested": _list_of(rng, n, inner, 5, 0.2),
            "triples": pa.FixedSizeListArray.from_arrays(
                fixed_values, 3, mask=pa.array(_mask(rng, n, 0.2))
            ),
        }
    )
    return table.schema, _split(table, 600)


def structs(seed: int = 5) -> Case:
    """Structs nested two deep with nulls at every level and a list inside, in two batches.

    Each batch is built on its own (offset zero): with nulls at two struct levels the reference
    reads values under child nulls (see ``records_digest``), so the bytes under those nulls are
    part of the data here and must not be rewritten by slicing or copying.
    """
    rng = np.random.default_rng(seed)
    batches = [_struct_batch(rng, 600) for _ in range(2)]
    return batches[0].schema, batches


def _struct_batch(rng: np.random.Generator, n: int) -> pa.RecordBatch:
    inner = pa.StructArray.from_arrays(
        [
            pa.array(rng.normal(size=n).astype(np.float32), mask=_mask(rng, n, 0.2)),
            _list_of(
                rng, n, pa.array(_ints(rng, 5 * n, np.int32), mask=_mask(rng, 5 * n, 0.2)), 4, 0.2
            ),
        ],
        names=["c", "d"],
        mask=pa.array(_mask(rng, n, 0.2)),
    )
    outer = pa.StructArray.from_arrays(
        [
            pa.array(_ints(rng, n, np.int64), mask=_mask(rng, n, 0.2)),
            pa.array(_strings(rng, n, 10), mask=_mask(rng, n, 0.2)),
            inner,
        ],
        names=["a", "b", "t"],
        mask=pa.array(_mask(rng, n, 0.2)),
    )
    return pa.record_batch({"id": pa.array(np.arange(n, dtype=np.int64)), "s": outer})


def odf_like(seed: int = 6) -> Case:
    """A typical ODF data slice: system columns and a few data columns, 25,000 rows."""
    rng = np.random.default_rng(seed)
    n = 25_000
    event_ms = np.sort(rng.integers(1_600_000_000_000, 1_700_000_000_000, n))
    table = pa.table(
        {
            "offset": pa.array(np.arange(n, dtype=np.int64)),
            "op": pa.array(rng.choice(np.array([0, 1, 2, 3], dtype=np.int32), n)),
            "system_time": pa.array(
                np.full(n, 1_700_000_000_123, dtype=np.int64), pa.timestamp("ms", "UTC")
            ),
            "event_time": pa.array(event_ms, pa.timestamp("ms", "UTC")),
            "city": pa.array(_strings(rng, n, 16), mask=_mask(rng, n, 0.05)),
            "population": pa.array(rng.integers(0, 10**7, n), mask=_mask(rng, n, 0.05)),
        }
    )
    return table.schema, _split(table, 10_000)


def odf_like_reordered(seed: int = 6) -> Case:
    """``odf_like`` with two columns swapped: same values, different hash."""
    schema, batches = odf_like(seed)
    order = ["offset", "op", "system_time", "event_time", "population", "city"]
    reordered = [batch.select(order) for batch in batches]
    return reordered[0].schema, reordered


CASES: dict[str, Callable[[], Case]] = {
    "fixed_width": fixed_width,
    "booleans": booleans,
    "binary_like": binary_like,
    "lists": lists,
    "structs": structs,
    "odf_like": odf_like,
    "odf_like_reordered": odf_like_reordered,
}
