"""Logical hashes checked against values computed by the reference arrow-digest crate.

The expected digests were computed once by arrow-digest 57.0.0 (``RecordDigestV0<Sha3_256>``,
built from its source) over exactly the batches below, handed to it through the Arrow C data
interface. They are not produced by this code base.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from protocol.hashing import RecordsDigest, UnsupportedDataTypeError, logical_hash
from protocol.identity import Multicodec
from tests.protocol.hashing.hashing_datagen import CASES

GOLDEN = {
    "fixed_width": "d1d49e83dc2b7a81b18f322ec3ad15249a0a9f05f3b68dbd96672260fb5af5e4",
    "booleans": "47243361e0dfe8b21156cbbeceabad1e19d546434c09bc37ca48dc37033c28df",
    "binary_like": "a29db2d42a7fade70885c6d4d3a1a287e22aca7d3200e682e20c40ed4f92be10",
    "lists": "41a78db9dd06ddd9b01c653baac18c8d303ba1d0ab924fbdaa2720189e125cd8",
    "structs": "0d11ab71ebff1fc982118369595ea0e80384f1f2abcdad422341aae7675cf886",
    "odf_like": "bb610319ff8ac78c7869b47985e776931e554a1354374e513127f3403a345471",
    "odf_like_reordered": "ef46c0d21bd5ae2975ad50dda2db4c44f0aa44c5e0f38f255b17d6b383721163",
}


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_matches_reference(case: str) -> None:
    schema, batches = CASES[case]()
    digest = RecordsDigest(schema)
    for batch in batches:
        digest.update(batch)
    result = digest.finalize()
    assert result.code == Multicodec.ARROW0_SHA3_256
    assert result.digest.hex() == GOLDEN[case]


def test_multihash_form_of_reference_hash() -> None:
    schema, batches = CASES["odf_like"]()
    assert str(logical_hash(batches, schema)) == "f9680c00120" + GOLDEN["odf_like"]


def test_small_literal_table() -> None:
    table = pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": ["a", "b", "c"]})
    assert logical_hash(table).digest.hex() == (
        "5684f7bfdcaf4ff7d1f9bf0fd766c98d8ded335e933fb4eec245054f3206b61a"
    )


def test_primitive_nulls_strings_and_booleans() -> None:
    table = pa.table(
        {
            "a": pa.array([1, None, 3], pa.int64()),
            "b": ["a", None, "ccc"],
            "c": [True, None, False],
        }
    )
    assert logical_hash(table).digest.hex() == (
        "d09964f9ed827c792ac4fdf9af957fbbcdcda42b68967a2b560c2e85fae78e7f"
    )


def test_struct_parent_and_child_nulls_combine_as_the_reference_does() -> None:
    # Row 1: parent null, child x null -> null; row 2: parent valid, child y null -> the
    # reference ORs the two validity bitmaps, so y's slot is hashed as a (empty) value.
    fields = [pa.field("x", pa.int32()), pa.field("y", pa.string())]
    struct = pa.StructArray.from_arrays(
        [pa.array([1, None, 3, None], pa.int32()), pa.array(["a", "b", None, None])],
        fields=fields,
        mask=pa.array([False, True, False, False]),
    )
    assert logical_hash(pa.table({"s": struct})).digest.hex() == (
        "c4f3c079ee8f02f4d3d754cb8bdb3a5af52f2ba600024c7fb656806b7be91494"
    )


def test_struct_nulls_cancelling_out_drop_deeper_nulls_as_the_reference_does() -> None:
    inner = pa.StructArray.from_arrays(
        [pa.array([1, 2, None, 4], pa.int64())],
        names=["v"],
        mask=pa.array([False, False, True, False]),
    )
    outer = pa.StructArray.from_arrays(
        [inner, pa.array([5, None, 7, 8])],
        names=["in", "w"],
        mask=pa.array([False, True, False, False]),
    )
    assert logical_hash(pa.table({"o": outer})).digest.hex() == (
        "89761314b2bf0e4392ed053afce69cd1d2ec040776ddf6073beeda0caa502739"
    )


def test_list_inside_struct_with_null_parents() -> None:
    lists = pa.array([[1], [2, 3], None, []], pa.list_(pa.int8()))
    struct = pa.StructArray.from_arrays(
        [lists], names=["l"], mask=pa.array([False, True, False, True])
    )
    assert logical_hash(pa.table({"s": struct})).digest.hex() == (
        "2c8f514ef9e74d1f8ee654029e54efb3b60b8c19f70a0678c9287cdc34618b49"
    )


def test_empty_table_hashes_schema_and_types() -> None:
    table = pa.table(
        {
            "a": pa.array([], pa.int32()),
            "s": pa.array([], pa.string()),
            "l": pa.array([], pa.list_(pa.int32())),
        }
    )
    assert logical_hash(table).digest.hex() == (
        "1556d5ec7a7af6e3fef57020a43c52a1a4fd45aa73509bcab6382a17e68956f4"
    )


@pytest.mark.parametrize(
    "data_type",
    [
        pa.duration("s"),
        pa.map_(pa.string(), pa.int32()),
        pa.list_(pa.struct([("a", pa.int32())])),
        pa.null(),
        pa.month_day_nano_interval(),
    ],
    ids=str,
)
def test_types_the_reference_cannot_hash_are_typed_errors(data_type: pa.DataType) -> None:
    table = pa.table({"ok": [1, 2], "bad": pa.array([None, None], data_type)})
    with pytest.raises(UnsupportedDataTypeError, match="column 'bad'"):
        logical_hash(table)


def test_unsupported_type_nested_in_struct_names_the_path() -> None:
    struct = pa.array([{"d": 1}], pa.struct([("d", pa.duration("ms"))]))
    with pytest.raises(UnsupportedDataTypeError, match="column 's.d'"):
        logical_hash(pa.table({"s": struct}))
