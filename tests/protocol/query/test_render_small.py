"""The value-by-value path for small chunks (``render.small``) writes the bytes the vectorized
path writes, in every data format and both forms, for every type (those it leaves to the
vectorized path included: a chunk holding one of them is written the vectorized way whole)."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.query import DataFormat
from protocol.query.floats import wire_text
from protocol.query.render import data
from protocol.query.render.columns import Style, column_pieces, render_column
from protocol.query.render.data import DataWriter
from protocol.query.render.small import SMALL_ROWS, small_texts
from protocol.query.render.text import Indexed, join
from tests.protocol.query.rendering import render_batch

FORMATS = [DataFormat.JSON_AOS, DataFormat.JSON_AOA, DataFormat.JSON_SOA]


def _both_forms(batch: pa.RecordBatch, data_format: DataFormat) -> tuple[bytes, bytes]:
    writer = DataWriter(data_format, wire=True, canonical=True)
    wire, canonical = [], []
    for rendered in (render_batch(writer, batch), writer.finish()):
        wire += rendered.wire
        canonical += rendered.canonical
    return b"".join(bytes(p) for p in wire), b"".join(bytes(p) for p in canonical)


def _assert_paths_agree(batch: pa.RecordBatch, monkeypatch: pytest.MonkeyPatch) -> None:
    assert batch.num_rows <= SMALL_ROWS
    for data_format in FORMATS:
        small = _both_forms(batch, data_format)
        with monkeypatch.context() as patched:
            patched.setattr(data, "SMALL_ROWS", 0)  # every chunk the vectorized way
            vectorized = _both_forms(batch, data_format)
        assert small == vectorized, (data_format, small, vectorized)


PLAIN = pa.record_batch(
    {
        "nothing": pa.nulls(6),
        "flag": pa.array([True, False, None, True, False, True]),
        "tiny": pa.array([-128, 127, None, 0, 1, -1], pa.int8()),
        "big": pa.array([2**64 - 1, 0, None, 1, 2**63, 7], pa.uint64()),
        "signed": pa.array([-(2**63), 2**63 - 1, None, -5, 0, 9], pa.int64()),
        "f64": pa.array(
            [float("nan"), float("inf"), float("-inf"), None, -0.0, 1.7976931348623157e308]
        ),
        "more_f64": pa.array([5e-324, 123.0, 0.1 + 0.2, 1e16, 1.5e-7, -2.5e15]),
        "f32": pa.array([0.1, float("nan"), None, -3.4028235e38, 1e-45, 16777216.0], pa.float32()),
        "f16": pa.array(np.array([1.5, -0.0, np.inf, 65504, 6e-8, 0.1], np.float16)),
        "text": pa.array(["é❤𝄞", "\x7f\x00\x1f", 'quote " back \\', None, "\u2028", "plain"]),
        "large": pa.array(["a", None, "\n\t\r\b\f", "ü", "", "z"], pa.large_string()),
        "view": pa.array(["v", "w", None, "🙂", "x", "y"], pa.string_view()),
        "renamed": pa.array([1, 2, 3, 4, 5, 6]),
    }
)


def test_plain_columns_take_the_small_path() -> None:
    for column in PLAIN.columns:
        for canonical in (False, True):
            texts = small_texts(column, canonical=canonical)
            assert texts == render_column(column, Style(canonical=canonical)).to_pylist()


def test_plain_columns_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_paths_agree(PLAIN, monkeypatch)
    _assert_paths_agree(PLAIN.slice(2, 3), monkeypatch)
    repeated = pa.record_batch([PLAIN.column(1), PLAIN.column(2)], names=["b", "b"])
    _assert_paths_agree(repeated, monkeypatch)  # a repeated name keeps its last value
    _assert_paths_agree(pa.record_batch([pa.array([1, 2])], names=["ключ\n"]), monkeypatch)


def test_a_batch_without_columns_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_paths_agree(pa.RecordBatch.from_pydict({}).slice(0, 0), monkeypatch)
    empty_rows = pa.Table.from_pydict({"a": [1, 2, 3]}).select([]).to_batches()
    for batch in empty_rows:
        _assert_paths_agree(batch, monkeypatch)


def _timestamps() -> dict[str, pa.Array]:
    raw = [0, -1, 1_577_880_000_123, None, 253_402_300_799_999, -62_135_596_800_001]
    columns: dict[str, pa.Array] = {}
    for unit in ("s", "ms", "us", "ns"):
        for zone in (None, "UTC", "+05:30", "-0800", "America/New_York", "Asia/Kolkata"):
            values = pa.array(raw, pa.int64())
            if unit == "ns":
                values = pa.array([v if v is None else v % 2**40 for v in raw], pa.int64())
            columns[f"ts_{unit}_{zone}"] = values.cast(pa.timestamp(unit, zone))
    return columns


OTHER = pa.record_batch(
    {
        "decimal": pa.array(
            [decimal.Decimal("-0.05"), decimal.Decimal("12.34"), None, decimal.Decimal("-99.99")]
            + [decimal.Decimal("0.00"), decimal.Decimal("1.00")],
            pa.decimal128(4, 2),
        ),
        "binary": pa.array([b"\x00\xff", b"", None, b"ab", b"\x10", b"z"]),
        "fixed": pa.array([b"ab", b"cd", None, b"ef", b"gh", b"ij"], pa.binary(2)),
        "date": pa.array([0, -1, None, 2_932_896, 18_000, 1], pa.date32()),
        "time": pa.array([0, 86_399_999, None, 1, 500, 43_200_000], pa.time32("ms")),
        "duration": pa.array([0, -1, None, 3_628_800, 42, 1], pa.duration("s")),
        "list": pa.array([[1.5, None], [], None, [float("nan")], [2.0], [0.1]]),
        "struct": pa.array(
            [{"z": "é", "a": 1}, {"z": None, "a": None}, None, {"z": "\x00", "a": -1}]
            + [{"z": "x", "a": 2}, {"z": "y", "a": 3}]
        ),
        "nested": pa.array(
            [[{"k": [1, 2]}], [], None, [{"k": None}], [{"k": []}], [{"k": [3]}]],
        ),
        **_timestamps(),
        "text": PLAIN.column("text"),
        "f64": PLAIN.column("f64"),
    }
)


def test_other_types_fall_back_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    for column in OTHER.columns[:9]:
        assert small_texts(column, canonical=False) is None
    _assert_paths_agree(OTHER, monkeypatch)


def test_batches_around_the_threshold_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    values = rng.normal(size=SMALL_ROWS + 1) * 10.0 ** rng.integers(-30, 30, SMALL_ROWS + 1)
    table = pa.table({"x": values, "s": [f"r{i}\u00e9" for i in range(SMALL_ROWS + 1)]})
    for rows in (1, SMALL_ROWS - 1, SMALL_ROWS):
        _assert_paths_agree(table.slice(0, rows).to_batches()[0], monkeypatch)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.floats()), min_size=1, max_size=SMALL_ROWS),
    st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=SMALL_ROWS),
)
def test_any_floats_and_strings_agree(floats: list[float | None], texts: list[str | None]) -> None:
    rows = min(len(floats), len(texts))
    batch = pa.record_batch(
        {
            "f": pa.array(floats[:rows], pa.float64()),
            "g": pa.array(floats[:rows], pa.float64()).cast(pa.float32(), safe=False),
            "s": pa.array(texts[:rows], pa.string()),
        }
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        _assert_paths_agree(batch, monkeypatch)


def test_row_pieces_agree_with_columns() -> None:
    """Columns left in pieces for the row join (timestamps and strings without nulls) join to
    the texts ``render_column`` writes."""
    plain_strings = pa.array(["a", "é❤", "", "x y"])
    escaped = pa.array(["a", "\x7f", 'q"', "\u2028"], pa.large_string())
    columns = [plain_strings, escaped, plain_strings.cast(pa.string_view())]
    for column in _timestamps().values():
        columns.append(column.filter(column.is_valid()))
    columns.append(pa.array([1, 86_399_999, 5], pa.time32("ms")))
    for column in columns:
        for canonical in (False, True):
            style = Style(canonical=canonical)
            pieces = column_pieces(column, style)
            assert join(pieces).to_pylist() == render_column(column, style).to_pylist()
    assert len(column_pieces(plain_strings, Style())) == 3  # left in pieces
    assert len(column_pieces(columns[3], Style())) > 1


def _few_decimals(whole: int, places: int, negative: bool) -> float:
    return (-whole if negative else whole) / 10**places


_COLUMN_VALUES: dict[str, tuple[pa.DataType, st.SearchStrategy[object]]] = {
    "i8": (pa.int8(), st.integers(-128, 127)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "u64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "flag": (pa.bool_(), st.booleans()),
    "f64": (pa.float64(), st.floats()),
    "price": (
        pa.float64(),
        st.builds(_few_decimals, st.integers(1, 10**15 - 1), st.integers(0, 15), st.booleans()),
    ),
    "zero": (pa.float64(), st.sampled_from([0.0, -0.0, 1e-5, -1e-5, 8.99e14, 1e15])),
    "f32": (pa.float32(), st.floats(width=32)),
    "text": (pa.string(), st.text()),
    "ascii": (pa.large_string(), st.text(alphabet=st.characters(max_codepoint=127))),
}


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_random_columns_of_many_types_agree(data: st.DataObject) -> None:
    """Random values of every plain type (NaN, infinities, -0.0, extreme integers, unicode and
    control characters, floats with a few decimals), with and without nulls: the vectorized
    path, the pieces it leaves to the row join included, writes what the value-by-value path
    writes."""
    rows = data.draw(st.integers(1, SMALL_ROWS), label="rows")
    names = data.draw(
        st.lists(st.sampled_from(sorted(_COLUMN_VALUES)), min_size=1, max_size=6), label="columns"
    )
    columns = {}
    for position, name in enumerate(names):
        kind, values = _COLUMN_VALUES[name]
        nullable = data.draw(st.booleans(), label=f"{name} nullable")
        drawn = data.draw(
            st.lists(st.none() | values if nullable else values, min_size=rows, max_size=rows),
            label=name,
        )
        columns[f"{name}{position}é"] = pa.array(drawn, kind)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _assert_paths_agree(pa.record_batch(columns), monkeypatch)


def test_integers_of_a_small_range_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Integers spanning few values beside their count (an ``op`` column, a price's whole part
    and cents) become an indexed table of their range's texts that the row join folds with its
    neighbours: every width, at both ends of its range, writes what the scalar rules write."""
    rng = np.random.default_rng(5)
    columns: dict[str, pa.Array] = {}
    for kind in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64()):
        info = np.iinfo(kind.to_pandas_dtype())
        for end, low in (("low", int(info.min)), ("high", int(info.max) - 7)):
            values = rng.integers(low, low + 7, 400, endpoint=True, dtype=info.dtype)
            columns[f"{kind}_{end}"] = pa.array(values, kind)
    columns["op"] = pa.array(rng.integers(0, 4, 400), pa.int32())
    prices = np.round(rng.uniform(0.01, 3, 400), 2) * rng.choice([-1, 1], 400)
    columns["price"] = pa.array(prices)  # the few-decimals path: no 0.0
    columns["seq"] = pa.array(np.arange(400))  # a wide range: Arrow's cast
    for name, column in columns.items():
        pieces = column_pieces(column, Style())
        if name != "seq":
            assert any(isinstance(piece, Indexed) for piece in pieces), name
        scalar = wire_text if name == "price" else str
        assert join(pieces).to_pylist() == [scalar(value) for value in column.to_pylist()]
    batch = pa.record_batch(columns)
    for start in range(0, len(batch), SMALL_ROWS):
        _assert_paths_agree(batch.slice(start, SMALL_ROWS), monkeypatch)


def test_an_index_outside_its_table_is_refused() -> None:
    """The row join takes without Arrow's bounds check: an indexed piece's indices are checked
    against its table first, and its columns' lengths against each other."""
    table = pa.array(["a", "b"], pa.large_string())
    for index in ([0, 2, 1, 1], [0, -1, 1, 1]):
        with pytest.raises(IndexError, match="outside a table of 2 texts"):
            join(["[", Indexed(table, np.array(index, dtype=np.int64)), "]"])
    with pytest.raises(ValueError, match="differ in length"):
        join([table, ",", pa.array(["x"], pa.large_string())])
    assert join(["[", Indexed(table, np.array([1, 0, 1, 1])), "]"]).to_pylist() == [
        "[b]",
        "[a]",
        "[b]",
        "[b]",
    ]
