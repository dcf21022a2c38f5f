"""What the logical hash must and must not depend on, per arrow-digest ``RecordsDigestV0``."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from protocol.hashing import (
    PARQUET_BATCH_ROWS,
    DataFileError,
    FileDigest,
    FileHashes,
    RecordsDigest,
    SchemaMismatchError,
    hash_parquet_file,
    logical_hash,
    logical_hash_parquet,
    open_parquet,
    parquet_files,
    physical_hash_file,
)
from tests.protocol.hashing.hashing_datagen import CASES

# Cases whose hash cannot depend on batch boundaries (no struct with nulls at two levels).
SPLIT_INVARIANT = ["fixed_width", "booleans", "binary_like", "lists", "odf_like"]


def _table(case: str) -> pa.Table:
    schema, batches = CASES[case]()
    return pa.Table.from_batches(batches, schema)


@pytest.mark.parametrize("case", SPLIT_INVARIANT)
def test_hash_does_not_depend_on_batch_boundaries(case: str) -> None:
    table = _table(case)
    whole = logical_hash(table.combine_chunks())
    rng = np.random.default_rng(42)
    cuts = np.sort(rng.choice(np.arange(1, table.num_rows), size=7, replace=False))
    bounds = [0, *cuts.tolist(), table.num_rows]
    batches = [
        batch
        for start, end in zip(bounds, bounds[1:], strict=False)
        for batch in table.slice(start, end - start).to_batches()
    ]
    assert logical_hash(batches, table.schema) == whole
    assert (
        logical_hash(table.slice(0, 1).to_batches() + table.slice(1).to_batches(), table.schema)
        == whole
    )


def test_struct_without_two_level_nulls_is_split_invariant() -> None:
    child = pa.array(np.arange(100, dtype=np.int64), mask=np.arange(100) % 7 == 0)
    struct = pa.StructArray.from_arrays([child], names=["v"])
    table = pa.table({"s": struct})
    whole = logical_hash(table)
    assert (
        logical_hash(
            [table.slice(0, 33).to_batches()[0], table.slice(33).to_batches()[0]], table.schema
        )
        == whole
    )


def test_dictionary_encoded_columns_hash_as_their_values() -> None:
    table = _table("odf_like")
    encoded = table.set_column(
        table.schema.get_field_index("city"), "city", pc.dictionary_encode(table["city"])
    )
    assert pa.types.is_dictionary(encoded.schema.field("city").type)
    assert logical_hash(encoded) == logical_hash(table)


def test_dictionary_inside_list_and_struct() -> None:
    words = pa.array([["a", "b"], None, ["a", None]], pa.list_(pa.string()))
    words_dict = pa.array(
        [["a", "b"], None, ["a", None]], pa.list_(pa.dictionary(pa.int8(), pa.string()))
    )
    plain = pa.table({"w": words, "s": pa.array([{"k": "x"}, {"k": "y"}, None])})
    struct_dict = pa.StructArray.from_arrays(
        [pa.array(["x", "y", None]).dictionary_encode()],
        names=["k"],
        mask=pa.array([False, False, True]),
    )
    encoded = pa.table({"w": words_dict, "s": struct_dict})
    assert logical_hash(encoded) == logical_hash(plain)


def test_all_valid_bitmap_hashes_like_no_bitmap() -> None:
    values = np.arange(50, dtype=np.int32)
    without = pa.array(values)
    with_bitmap = pa.Array.from_buffers(
        pa.int32(),
        50,
        [pa.py_buffer(np.packbits(np.ones(50, bool), bitorder="little")), without.buffers()[1]],
    )
    assert without.buffers()[0] is None and with_bitmap.buffers()[0] is not None
    words = pa.array([f"w{i}" for i in range(50)])
    words_bitmap = pa.Array.from_buffers(
        pa.string(), 50, [with_bitmap.buffers()[0], *words.buffers()[1:]]
    )
    assert logical_hash(pa.table({"a": with_bitmap, "w": words_bitmap})) == logical_hash(
        pa.table({"a": without, "w": words})
    )


def test_physical_layout_variants_hash_alike() -> None:
    words = ["alpha", None, "", "βeta"]
    blobs = [b"\x00\x01", None, b"", b"xyz"]
    base = logical_hash(
        pa.table(
            {"s": pa.array(words), "b": pa.array(blobs), "l": pa.array([[1], None, [], [2, 3]])}
        )
    )
    for string_type, binary_type, list_type in [
        (pa.large_string(), pa.large_binary(), pa.large_list(pa.int64())),
        (pa.string_view(), pa.binary_view(), pa.list_(pa.int64())),
    ]:
        table = pa.table(
            {
                "s": pa.array(words, string_type),
                "b": pa.array(blobs, binary_type),
                "l": pa.array([[1], None, [], [2, 3]], list_type),
            }
        )
        assert logical_hash(table) == base


def test_fixed_size_binary_hashes_like_binary_of_same_values() -> None:
    values = [b"ab", None, b"cd"]
    assert logical_hash(pa.table({"x": pa.array(values, pa.binary(2))})) == logical_hash(
        pa.table({"x": pa.array(values, pa.binary())})
    )


def test_column_order_and_names_matter() -> None:
    a, b = _table("odf_like"), CASES["odf_like_reordered"]()
    assert logical_hash(b[1], b[0]) != logical_hash(a)
    assert logical_hash(a.rename_columns([*a.column_names[:-1], "pop"])) != logical_hash(a)


def test_nullability_flag_does_not_matter_but_nulls_do() -> None:
    values = pa.array([1, 2, 3], pa.int64())
    nullable = pa.table({"a": values})
    required = pa.Table.from_arrays(
        [values], schema=pa.schema([pa.field("a", pa.int64(), nullable=False)])
    )
    assert logical_hash(nullable) == logical_hash(required)
    assert logical_hash(pa.table({"a": pa.array([1, None, 3])})) != logical_hash(nullable)


@pytest.mark.parametrize(
    "left, right",
    [
        (pa.array([1, 2], pa.int32()), pa.array([1, 2], pa.uint32())),
        (pa.array([1, 2], pa.int32()), pa.array([1, 2], pa.int64())),
        (pa.array([1, 2], pa.timestamp("ms")), pa.array([1, 2], pa.timestamp("ms", "UTC"))),
        (pa.array([None, 1], pa.int16()), pa.array([0, 1], pa.int16())),
        (pa.array([["a"], ["b", "c"]]), pa.array([["a", "b"], ["c"]])),
        (pa.array([[1], None]), pa.array([[1], []])),
        (pa.array(["ab", "c"]), pa.array(["a", "bc"])),
    ],
)
def test_type_and_value_differences_change_the_hash(left: pa.Array, right: pa.Array) -> None:
    assert logical_hash(pa.table({"c": left})) != logical_hash(pa.table({"c": right}))


def test_one_byte_null_marker_equals_a_zero_byte_value() -> None:
    # arrow-digest writes a null as one zero byte, which is also how int8/uint8 0 is written;
    # the reference cannot tell them apart, so neither may we.
    assert logical_hash(pa.table({"c": pa.array([None, 1], pa.int8())})) == logical_hash(
        pa.table({"c": pa.array([0, 1], pa.int8())})
    )


def test_update_rejects_a_batch_of_another_schema() -> None:
    digest = RecordsDigest(pa.schema([("a", pa.int64())]))
    with pytest.raises(SchemaMismatchError):
        digest.update(pa.record_batch({"a": pa.array(["x"])}))
    with pytest.raises(SchemaMismatchError):
        digest.update(pa.record_batch({"b": pa.array([1])}))


def test_empty_batch_sequence_needs_a_schema() -> None:
    schema = pa.schema([("a", pa.int64())])
    assert logical_hash([], schema) == logical_hash(pa.table({"a": pa.array([], pa.int64())}))
    with pytest.raises(SchemaMismatchError):
        logical_hash([])


def test_finalize_can_be_called_midway() -> None:
    schema, batches = CASES["booleans"]()
    digest = RecordsDigest(schema)
    digest.update(batches[0])
    partial = digest.finalize()
    for batch in batches[1:]:
        digest.update(batch)
    assert partial == logical_hash(batches[:1], schema)
    assert digest.finalize() == logical_hash(batches, schema)


@pytest.mark.parametrize("row_group_size", [999, PARQUET_BATCH_ROWS, 30_000])
def test_parquet_hash_equals_table_hash(tmp_path, row_group_size: int) -> None:
    table = _table("odf_like")
    path = tmp_path / "slice.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    assert logical_hash_parquet(path) == logical_hash(table)


def test_parquet_of_nested_data(tmp_path) -> None:
    table = _table("lists")
    path = tmp_path / "lists.parquet"
    pq.write_table(table, path, row_group_size=500)
    assert logical_hash_parquet(path) == logical_hash(table)


def test_parquet_errors_name_the_file(tmp_path) -> None:
    missing = tmp_path / "missing.parquet"
    with pytest.raises(DataFileError, match="missing.parquet"):
        logical_hash_parquet(missing)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(DataFileError, match="garbage.parquet"):
        logical_hash_parquet(garbage)


def test_file_digest_of_written_batches_equals_the_hash_of_the_file(tmp_path) -> None:
    """A writer hashing its (arbitrarily cut) batches must get what reading the file back gives,
    even for structs with nulls at two levels, whose hash depends on batch boundaries."""
    rng = np.random.default_rng(7)
    rows = 2 * PARQUET_BATCH_ROWS + 1234
    # Nulls propagate down, as Spark writes null structs and Parquet reads them back.
    outer_null = rng.random(rows) < 0.3
    inner_null = outer_null | (rng.random(rows) < 0.3)
    leaf_null = inner_null | (rng.random(rows) < 0.3)
    # Zeros under null slots, as Parquet readers fill them: arrow-digest hashes a leaf's slot when
    # any ancestor is valid, so what lies under a null leaf counts too.
    leaf = pa.array(np.where(leaf_null, 0, rng.integers(1, 100, rows)), mask=leaf_null)
    inner = pa.StructArray.from_arrays([leaf], names=["v"], mask=pa.array(inner_null))
    outer = pa.StructArray.from_arrays([inner], names=["inner"], mask=pa.array(outer_null))
    table = pa.table({"s": outer})
    cuts = [0, 1, 4_321, 9_999, 15_000, 21_000, rows]
    written = [
        table.slice(a, b - a).combine_chunks().to_batches()[0] for a, b in itertools.pairwise(cuts)
    ]
    path = tmp_path / "nested.parquet"
    with pq.ParquetWriter(path, table.schema) as writer:
        for batch in written:
            writer.write_batch(batch)

    digest = FileDigest(table.schema)
    for batch in written:
        digest.update(batch)
    assert digest.finalize() == logical_hash_parquet(path)
    assert logical_hash(written, table.schema) != logical_hash_parquet(
        path
    )  # why FileDigest exists


@pytest.mark.parametrize("in_memory", [True, False])
def test_dictionary_pages_are_read_undecoded_and_both_hashes_come_from_one_read(
    tmp_path, monkeypatch: pytest.MonkeyPatch, in_memory: bool
) -> None:
    """A string column whose pages are all dictionary-encoded is read as a dictionary, one with
    plain pages (the writer's dictionary outgrew its page) plainly; the hashes are the table's."""
    n = 30_000
    table = pa.table(
        {
            "offset": pa.array(np.arange(n, dtype=np.int64)),
            "repeated": pa.array((["alpha", "beta", None, "gamma"] * n)[:n]),
            "unique": pa.array([f"value-{i:08d}" for i in range(n)]),
        }
    )
    path = tmp_path / "slice.parquet"
    pq.write_table(table, path, dictionary_pagesize_limit=16 << 10)
    parquet = open_parquet(str(path))
    assert pa.types.is_dictionary(parquet.schema_arrow.field("repeated").type)
    assert not pa.types.is_dictionary(parquet.schema_arrow.field("unique").type)
    if not in_memory:
        monkeypatch.setattr(parquet_files, "IN_MEMORY_BYTES", 0)
    assert logical_hash_parquet(path) == logical_hash(table)
    with ThreadPoolExecutor(2) as pool:
        hashes = hash_parquet_file(path, pool)
    assert hashes == FileHashes(logical_hash(table), physical_hash_file(path))


def test_hash_parquet_file_names_a_missing_file(tmp_path) -> None:
    with ThreadPoolExecutor(1) as pool, pytest.raises(DataFileError, match="missing.parquet"):
        hash_parquet_file(tmp_path / "missing.parquet", pool)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_copied_digest_hashes_as_a_fresh_one(case: str) -> None:
    """A pull's data checks copy one started digest per schema (``RecordsDigest.copy``): each
    copy hashes as a digest made anew, and updating one copy leaves the others as they were."""
    schema, batches = CASES[case]()
    started = RecordsDigest(schema)
    first, second = started.copy(), started.copy()
    for batch in batches:
        first.update(batch)
    assert first.finalize() == logical_hash(batches, schema)
    assert second.finalize() == started.finalize() == logical_hash([], schema)
    midway = first.copy()
    for batch in batches:
        first.update(batch)
        midway.update(batch)
    assert first.finalize() == midway.finalize()


def test_a_digest_with_an_executor_is_not_copied() -> None:
    schema, _ = CASES["fixed_width"]()
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(ValueError, match="cannot be copied"):
            RecordsDigest(schema, pool).copy()
