"""The logical hash's fast paths hash what a straightforward digest does, over random tables.

Hypothesis draws a schema (every hashable type, lists, structs nested with nulls at several
levels, dictionary-encoded strings), a row count, null rates, a slice and batch cuts; the values
come from a seeded generator, with arbitrary bytes under nulls (arrow-digest's combining rule can
make those count). ``reference_digest`` hashes one value at a time from the raw buffers.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.types as pat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.hashing import RecordsDigest, logical_hash
from tests.protocol.hashing.reference_digest import reference_hash

_FIXED_WIDTH = [
    pa.int8(),
    pa.uint8(),
    pa.int16(),
    pa.uint16(),
    pa.int32(),
    pa.uint32(),
    pa.int64(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(20, 3),
    pa.decimal256(50, -2),
    pa.date32(),
    pa.date64(),
    pa.time32("ms"),
    pa.time64("ns"),
    pa.timestamp("ms", "UTC"),
    pa.timestamp("us"),
]
_VARIABLE = [
    pa.string(),
    pa.large_string(),
    pa.string_view(),
    pa.binary(),
    pa.large_binary(),
    pa.binary_view(),
    pa.binary(3),
    pa.binary(16),
    pa.dictionary(pa.int8(), pa.string()),
    pa.dictionary(pa.int32(), pa.large_binary()),
]
leaf_types = st.sampled_from([pa.bool_(), *_FIXED_WIDTH, *_VARIABLE])


def _structs(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    return st.lists(children, min_size=1, max_size=3).map(
        lambda ts: pa.struct([pa.field(f"f{i}", t) for i, t in enumerate(ts)])
    )


def _nested(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    items = children.filter(lambda t: not pat.is_struct(t))  # lists of structs are unhashable
    structs = _structs(children)
    return st.one_of(
        structs,
        items.map(pa.list_),
        structs,
        items.map(pa.large_list),
        st.tuples(items, st.integers(1, 3)).map(lambda t: pa.list_(t[0], t[1])),
    )


data_types = st.recursive(leaf_types, _nested, max_leaves=6)
structs_in_structs = _structs(st.one_of(leaf_types, _structs(leaf_types)))
"""Nulls at two struct levels: where arrow-digest's combining rule shows."""


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """A table of random columns, sliced and cut into batches the way readers and writers do."""
    column_types = draw(
        st.lists(st.one_of(leaf_types, data_types, structs_in_structs), min_size=1, max_size=4)
    )
    rows = draw(st.one_of(st.integers(0, 10), st.integers(50, 300)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    table = pa.table({f"c{i}": _array(t, rows, rng) for i, t in enumerate(column_types)})
    if draw(st.booleans()):
        start = draw(st.integers(0, rows))
        table = table.slice(start, draw(st.integers(0, rows - start)))
    cuts = sorted(draw(st.lists(st.integers(0, table.num_rows), max_size=3)))
    bounds = [0, *cuts, table.num_rows]
    batches = [
        batch
        for low, high in zip(bounds, bounds[1:], strict=False)
        for batch in table.slice(low, high - low).to_batches()
    ]
    return table.schema, batches


def _validity(rng: np.random.Generator, n: int) -> pa.Buffer | None:
    rate = rng.choice([0.0, 0.0, 0.05, 0.4, 1.0])
    if rate == 0.0 and rng.random() < 0.5:
        return None
    valid = rng.random(n) >= rate
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _array(data_type: pa.DataType, n: int, rng: np.random.Generator) -> pa.Array:
    """``n`` random values of ``data_type``; slots under nulls hold arbitrary bytes."""
    validity = _validity(rng, n)
    if pat.is_boolean(data_type):
        bits = pa.py_buffer(rng.integers(0, 256, (n + 7) // 8, dtype=np.uint8))
        return pa.Array.from_buffers(data_type, n, [validity, bits])
    if pat.is_fixed_size_binary(data_type):
        values = pa.py_buffer(rng.integers(0, 256, n * data_type.byte_width, dtype=np.uint8))
        return pa.Array.from_buffers(data_type, n, [validity, values])
    if pat.is_dictionary(data_type):
        dictionary = _array(data_type.value_type, int(rng.integers(1, 20)), rng)
        dictionary = pa.Array.from_buffers(
            dictionary.type, len(dictionary), [None, *dictionary.buffers()[1:]]
        )
        indices = rng.integers(0, len(dictionary), n).astype(data_type.index_type.to_pandas_dtype())
        return pa.DictionaryArray.from_buffers(
            data_type, n, [validity, pa.py_buffer(indices)], dictionary
        )
    if pat.is_string_view(data_type) or pat.is_binary_view(data_type):
        plain = pa.large_string() if pat.is_string_view(data_type) else pa.large_binary()
        return _array(plain, n, rng).cast(data_type)
    if pat.is_string(data_type) or pat.is_binary(data_type):
        return _strings(data_type, n, rng, validity, np.int32)
    if pat.is_large_string(data_type) or pat.is_large_binary(data_type):
        return _strings(data_type, n, rng, validity, np.int64)
    if pat.is_fixed_size_list(data_type):
        items = _array(data_type.value_type, n * data_type.list_size, rng)
        return pa.FixedSizeListArray.from_buffers(data_type, n, [validity], children=[items])
    if pat.is_list(data_type) or pat.is_large_list(data_type):
        offset_type = np.int32 if pat.is_list(data_type) else np.int64
        offsets = np.zeros(n + 1, offset_type)
        np.cumsum(rng.integers(0, 4, n), out=offsets[1:])
        items = _array(data_type.value_type, int(offsets[-1]), rng)
        return pa.Array.from_buffers(
            data_type, n, [validity, pa.py_buffer(offsets)], children=[items]
        )
    if pat.is_struct(data_type):
        children = [_array(data_type.field(i).type, n, rng) for i in range(data_type.num_fields)]
        return pa.StructArray.from_buffers(data_type, n, [validity], children=children)
    width = data_type.bit_width // 8
    values = pa.py_buffer(rng.integers(0, 256, n * width, dtype=np.uint8))
    return pa.Array.from_buffers(data_type, n, [validity, values])


def _strings(
    data_type: pa.DataType,
    n: int,
    rng: np.random.Generator,
    validity: pa.Buffer | None,
    offset_type: type,
) -> pa.Array:
    """Printable ASCII of random lengths, or all of one length (the matrix fast path)."""
    lengths = np.full(n, rng.integers(0, 9)) if rng.random() < 0.3 else rng.integers(0, 30, n)
    offsets: np.ndarray = np.zeros(n + 1, offset_type)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(32, 127, int(offsets[-1]), dtype=np.uint8)
    return pa.Array.from_buffers(
        data_type, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=3) as pool:
        yield pool


_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(tables())
def test_fast_paths_hash_as_the_reference_does(
    case: tuple[pa.Schema, list[pa.RecordBatch]],
) -> None:
    schema, batches = case
    assert logical_hash(batches, schema).digest == reference_hash(batches, schema)


@_SETTINGS
@given(tables())
def test_hashing_columns_on_threads_changes_nothing(
    executor: ThreadPoolExecutor, case: tuple[pa.Schema, list[pa.RecordBatch]]
) -> None:
    schema, batches = case
    digest = RecordsDigest(schema, executor)
    for batch in batches:
        digest.update(batch)
    assert digest.finalize().digest == reference_hash(batches, schema)


@pytest.mark.parametrize("parent_nulls", [False, True], ids=["top-level", "in-a-struct"])
def test_a_dictionary_of_one_width_hashes_as_the_reference_does(parent_nulls: bool) -> None:
    """Values of one length (codes, identifiers) take their records as matrix rows; own-null
    slots are null rows, or, where the combining rule makes them count, empty values."""
    rng = np.random.default_rng(5)
    n = 5_000
    codes = pa.array([f"code-{i:03d}" for i in range(40)], pa.string())
    own = rng.random(n) >= 0.2
    indices = pa.array(rng.integers(0, len(codes), n).astype(np.int16), mask=~own)
    column = pa.DictionaryArray.from_arrays(indices, codes).slice(7)
    if parent_nulls:
        parent_valid = rng.random(len(column)) >= 0.3
        column = pa.StructArray.from_arrays([column], names=["code"], mask=pa.array(~parent_valid))
    batch = pa.RecordBatch.from_arrays([column], names=["c"])
    batches = [batch.slice(0, 1_000), batch.slice(1_000)]
    assert logical_hash(batches, batch.schema).digest == reference_hash(batches, batch.schema)
