"""Result data written as the reference writes it: its record writers' tests
(``src/odf/data-utils/src/data/format/json.rs``) and api-server tests restated, the vectorized
paths checked against the scalar rules, and streaming checked against writing at once."""

from __future__ import annotations

import datetime as dt
import json
import math
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.query import DataFormat, DataTooLargeError
from protocol.query.canonical_json import canonical_json
from protocol.query.floats import canonical_text, reread, wire_text
from protocol.query.json_text import loads
from protocol.query.render import data as data_module
from protocol.query.render.columns import Style, render_column
from protocol.query.render.data import DataWriter
from tests.protocol.query.rendering import render_batch


def _write(batches: list[pa.RecordBatch], data_format: DataFormat, **options: object) -> str:
    writer = DataWriter(data_format, **options)  # type: ignore[arg-type]
    pieces = []
    for batch in batches:
        pieces += render_batch(writer, batch).wire
    pieces += writer.finish().wire
    return b"".join(bytes(piece) for piece in pieces).decode()


def _canonical(batches: list[pa.RecordBatch], data_format: DataFormat) -> bytes:
    writer = DataWriter(data_format, wire=False, canonical=True)
    pieces = []
    for batch in batches:
        pieces += render_batch(writer, batch).canonical
    pieces += writer.finish().canonical
    return b"".join(bytes(piece) for piece in pieces)


def _i256(value: int) -> bytes:
    return value.to_bytes(32, "little", signed=True)


def _sample_batch() -> pa.RecordBatch:
    """json.rs ``get_sample_batch`` (its Decimal256 holds i256::MAX and MIN, beyond precision
    76: the reference cuts them to 76 digits)."""
    decimals = pa.Array.from_buffers(
        pa.decimal256(76, 0), 2, [None, pa.py_buffer(_i256(2**255 - 1) + _i256(-(2**255)))]
    )
    return pa.record_batch(
        [
            pa.array([1, None], pa.uint64()),
            pa.array([100, 200], pa.uint64()),
            decimals,
            pa.array(["foo", "bar"]),
            pa.array(["sep,quotes'\",newline\nfin", None]),
            pa.array(["lfoo", "lbar"], pa.large_string()),
            pa.array(["vfoo", "vbar"], pa.string_view()),
            pa.array([b"foo", b"bar"]),
            pa.array([b"\x01\x02", b"\x03\x04"], pa.binary(2)),
            pa.array([b"lfoo", b"lbar"], pa.large_binary()),
            pa.array([b"vfoo", b"vbar"], pa.binary_view()),
            pa.array([1_577_880_000_000, 1_577_880_060_000], pa.timestamp("ms", "UTC")),
        ],
        names=[
            "nullable",
            "uint64",
            "decimal",
            "utf8",
            "utf8_special",
            "utf8_large",
            "utf8_view",
            "bin",
            "bin_fixed",
            "bin_large",
            "bin_view",
            "ts_milli",
        ],
    )


DECIMAL_MAX = "5789604461865809771178549250434395392663499233282028201972879200395656481996"

SAMPLE_ROWS: list[dict[str, object]] = [
    {
        "bin": "666f6f",
        "bin_fixed": "0102",
        "bin_large": "6c666f6f",
        "bin_view": "76666f6f",
        "decimal": DECIMAL_MAX,
        "nullable": 1,
        "ts_milli": "2020-01-01T12:00:00Z",
        "uint64": 100,
        "utf8": "foo",
        "utf8_special": "sep,quotes'\",newline\nfin",
        "utf8_large": "lfoo",
        "utf8_view": "vfoo",
    },
    {
        "bin": "626172",
        "bin_fixed": "0304",
        "bin_large": "6c626172",
        "bin_view": "76626172",
        "decimal": "-" + DECIMAL_MAX,
        "nullable": None,
        "ts_milli": "2020-01-01T12:01:00Z",
        "uint64": 200,
        "utf8": "bar",
        "utf8_special": None,
        "utf8_large": "lbar",
        "utf8_view": "vbar",
    },
]


def _lists_batch() -> pa.RecordBatch:
    """json.rs ``get_batch_lists``."""
    return pa.record_batch(
        [
            pa.array([None, [1, 2], None, None], pa.list_(pa.int32(), 2)),
            pa.array([None, [], ["foo", "bar"], ["baz", None]], pa.list_(pa.string())),
        ],
        names=["list_fixed_i32", "list_str"],
    )


def _structs_batch() -> pa.RecordBatch:
    """json.rs ``get_batch_structs``."""
    kind = pa.struct([("a", pa.string()), ("b", pa.string())])
    return pa.record_batch(
        [pa.array([{"a": "foo", "b": "baz"}, {"a": "bar", "b": None}, None], kind)],
        names=["struct"],
    )


def test_json_aos_simple() -> None:
    """json.rs test_json_aos_simple; objects come with sorted keys, as the reference's answer
    has them once read into a JSON value."""
    text = _write([_sample_batch()], DataFormat.JSON_AOS)
    assert json.loads(text) == SAMPLE_ROWS
    assert text.startswith('[{"bin":"666f6f","bin_fixed":"0102",')


def test_json_aos_lists_and_structs() -> None:
    """json.rs test_json_aos_lists, test_json_aos_structs."""
    assert json.loads(_write([_lists_batch()], DataFormat.JSON_AOS)) == [
        {"list_fixed_i32": None, "list_str": None},
        {"list_fixed_i32": [1, 2], "list_str": []},
        {"list_fixed_i32": None, "list_str": ["foo", "bar"]},
        {"list_fixed_i32": None, "list_str": ["baz", None]},
    ]
    assert json.loads(_write([_structs_batch()], DataFormat.JSON_AOS)) == [
        {"struct": {"a": "foo", "b": "baz"}},
        {"struct": {"a": "bar", "b": None}},
        {"struct": None},
    ]


def test_json_aoa() -> None:
    """json.rs test_json_aoa_simple, _lists, _structs (structs are arrays there)."""
    rows = json.loads(_write([_sample_batch()], DataFormat.JSON_AOA))
    assert rows[0] == [
        1,
        100,
        DECIMAL_MAX,
        "foo",
        "sep,quotes'\",newline\nfin",
        "lfoo",
        "vfoo",
        "666f6f",
        "0102",
        "6c666f6f",
        "76666f6f",
        "2020-01-01T12:00:00Z",
    ]
    assert rows[1][:3] == [None, 200, "-" + DECIMAL_MAX]
    assert json.loads(_write([_lists_batch()], DataFormat.JSON_AOA)) == [
        [None, None],
        [[1, 2], []],
        [None, ["foo", "bar"]],
        [None, ["baz", None]],
    ]
    assert (
        _write([_structs_batch()], DataFormat.JSON_AOA) == '[[["foo","baz"]],[["bar",null]],[null]]'
    )


def test_json_soa() -> None:
    """json.rs test_json_soa_simple, _lists, _empty."""
    columns = json.loads(_write([_sample_batch()], DataFormat.JSON_SOA))
    assert columns == {name: [row[name] for row in SAMPLE_ROWS] for name in SAMPLE_ROWS[0]}
    assert json.loads(_write([_lists_batch()], DataFormat.JSON_SOA)) == {
        "list_fixed_i32": [None, [1, 2], None, None],
        "list_str": [None, [], ["foo", "bar"], ["baz", None]],
    }
    empty = _sample_batch().slice(0, 0)
    assert json.loads(_write([empty], DataFormat.JSON_SOA)) == {name: [] for name in SAMPLE_ROWS[0]}


def test_empty_results() -> None:
    """json.rs test_json_aos_empty / test_json_aoa_empty; JsonSoA without any batch is ``{}``."""
    empty = _sample_batch().slice(0, 0)
    assert _write([empty], DataFormat.JSON_AOS) == "[]"
    assert _write([], DataFormat.JSON_AOA) == "[]"
    assert _write([], DataFormat.JSON_SOA) == "{}"


def test_json_soa_max_size() -> None:
    """json.rs test_json_soa_max_size: JsonSoA cannot stream, so it is capped; nothing of it is
    written before the end, so the cap can still be answered with an error."""
    with pytest.raises(DataTooLargeError):
        _write([_sample_batch()], DataFormat.JSON_SOA, soa_limit=10)
    writer = DataWriter(DataFormat.JSON_SOA, soa_limit=2_000)
    assert render_batch(writer, _sample_batch()).wire == []
    with pytest.raises(DataTooLargeError):
        for _ in range(10):
            assert render_batch(writer, _sample_batch()).wire == []


def test_data_formats_of_the_api_server() -> None:
    """test_data_query_handler_data_formats: the three layouts of the same rows."""
    batch = pa.record_batch(
        [pa.array([1, 0]), pa.array(["B", "A"]), pa.array([200, 100], pa.uint64())],
        names=["offset", "city", "population"],
    )
    assert _write([batch], DataFormat.JSON_AOS) == (
        '[{"city":"B","offset":1,"population":200},{"city":"A","offset":0,"population":100}]'
    )
    assert _write([batch], DataFormat.JSON_SOA) == (
        '{"city":["B","A"],"offset":[1,0],"population":[200,100]}'
    )
    assert _write([batch], DataFormat.JSON_AOA) == '[[1,"B",200],[0,"A",100]]'


def test_repeated_names_keep_the_last_value() -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([1]), pa.array([2])], names=["x", "x"])
    assert _write([batch], DataFormat.JSON_AOS) == '[{"x":2}]'
    assert _write([batch], DataFormat.JSON_SOA) == '{"x":[2]}'
    assert _write([batch], DataFormat.JSON_AOA) == "[[1,2]]"


def test_streaming_equals_writing_at_once() -> None:
    """Batch boundaries (and empty batches) never show in the bytes."""
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "i": pa.array(rng.integers(-(10**12), 10**12, 50_000)),
            "f": pa.array(rng.normal(size=50_000) * 1000),
            "s": pa.array([f"v{i}é" if i % 7 else None for i in range(50_000)]),
            "t": pa.array(rng.integers(0, 2**40, 50_000), pa.timestamp("us", "UTC")),
        }
    )
    whole = table.combine_chunks().to_batches()
    pieces = table.to_batches(max_chunksize=9_999)
    pieces.insert(2, pieces[0].slice(0, 0))
    for data_format in DataFormat:
        assert _write(pieces, data_format) == _write(whole, data_format)
        assert _canonical(pieces, data_format) == _canonical(whole, data_format)


def test_a_wide_batch_is_rendered_in_fewer_rows_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch is rendered at most ``VALUES_PER_CHUNK`` values at a time (its temporary arrays
    grow with rows x columns): chunk boundaries never show either."""
    rng = np.random.default_rng(6)
    batch = pa.record_batch(
        {f"c{n}": pa.array(rng.integers(-(10**6), 10**6, 3_000)) for n in range(12)}
    )
    at_once = {data_format: _write([batch], data_format) for data_format in DataFormat}
    sliced: list[int] = []
    real_rows = data_module.DataWriter._rows

    def counted(writer: DataWriter, chunk: pa.RecordBatch) -> data_module.Rendered:
        sliced.append(chunk.num_rows)
        return real_rows(writer, chunk)

    monkeypatch.setattr(data_module, "VALUES_PER_CHUNK", 12 * 700)
    monkeypatch.setattr(data_module.DataWriter, "_rows", counted)
    for data_format in DataFormat:
        assert _write([batch], data_format) == at_once[data_format]
    assert sliced[:5] == [700, 700, 700, 700, 200]


def test_canonical_data_is_canonical_json_of_the_answer() -> None:
    """The canonical bytes hashed for a proof are canonical_json of the value the wire text
    holds (for values the reference's reader keeps as they are)."""
    batch = pa.record_batch(
        [
            pa.array([1.5, -0.25, None, 1e21, 3.0]),
            pa.array(["é", "x\n", None, "𝄞", "/"]),
            pa.array([{"k": 1.0}, None, {"k": 2.5}, {"k": None}, {"k": -1e-7}]),
        ],
        names=["f", "s", "nested"],
    )
    for data_format in DataFormat:
        wire = _write([batch], data_format)
        assert canonical_json(loads(wire)) == _canonical([batch], data_format)


def _scalar_float(value: float | None, *, canonical: bool, single: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    again = reread(value, single=single)
    if math.isinf(again):
        again = value
    return canonical_text(again) if canonical else wire_text(again)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), max_size=200),
    st.booleans(),
)
def test_vectorized_floats_follow_the_scalar_rules(
    values: list[float | None], canonical: bool
) -> None:
    got = render_column(pa.array(values, pa.float64()), Style(canonical=canonical)).to_pylist()
    assert got == [_scalar_float(value, canonical=canonical) for value in values]


def test_vectorized_float32_follow_the_scalar_rules() -> None:
    rng = np.random.default_rng(3)
    values = (rng.normal(size=2000) * 10.0 ** rng.integers(-40, 38, 2000)).astype(np.float32)
    array = pa.array(values, pa.float32())
    for canonical in (False, True):
        got = render_column(array, Style(canonical=canonical)).to_pylist()
        want = [_scalar_float(float(v), canonical=canonical, single=True) for v in values]
        assert got == want


def _expected_timestamp(value: int, per_second: int, zone: str | None) -> str:
    seconds, rest = divmod(value, per_second)
    nanos = rest * (1_000_000_000 // per_second)
    offset = 0
    if zone is not None:
        from zoneinfo import ZoneInfo

        when = dt.datetime.fromtimestamp(min(seconds, 4_102_444_799), dt.UTC)
        offset = int(when.astimezone(ZoneInfo(zone)).utcoffset().total_seconds())
    local = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds + offset)
    text = f"{local.year:04d}" + local.strftime("-%m-%dT%H:%M:%S")
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1_000 == 0:
            text += f".{nanos // 1_000:06d}"
        else:
            text += f".{nanos:09d}"
    if zone is not None:
        text += (
            "Z"
            if offset == 0
            else f"{'-' if offset < 0 else '+'}{abs(offset) // 3600:02d}:{abs(offset) // 60 % 60:02d}"
        )
    return json.dumps(text)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("zone", [None, "UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"])
def test_timestamps_in_each_unit_and_zone(unit: str, zone: str | None) -> None:
    """arrow-rs prints timestamps as chrono does: RFC 3339 in the column's zone with an
    automatic fraction, ``Z`` for UTC; without a zone, no offset. The reference's zone tables
    end with 2099."""
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    rng = random.Random(unit + str(zone))
    values: list[int | None] = [None, 0, -1]
    for _ in range(500):
        whole = rng.randint(-2_000_000_000, 5_000_000_000 if unit != "ns" else 9_000_000_000)
        values.append(
            whole * per_second + rng.choice([0, rng.randrange(per_second), per_second // 2])
        )
    got = render_column(pa.array(values, pa.timestamp(unit, zone)), Style()).to_pylist()
    expected = ["null"] + [_expected_timestamp(v, per_second, zone) for v in values[1:]]  # type: ignore[arg-type]
    assert got == expected


def test_reference_tail_timestamps() -> None:
    """test_data_tail_handler: system and event times of the harness, ms in UTC."""
    value = int(dt.datetime(2050, 1, 1, 12, tzinfo=dt.UTC).timestamp() * 1000)
    array = pa.array([value], pa.timestamp("ms", "UTC"))
    assert render_column(array, Style()).to_pylist() == ['"2050-01-01T12:00:00Z"']


def test_other_temporal_types() -> None:
    cases = [
        (
            pa.array([0, 18262, -719529, 2932897, None], pa.date32()),
            ['"1970-01-01"', '"2020-01-01"', '"-0001-12-31"', '"+10000-01-01"', "null"],
        ),
        (pa.array([1_577_880_000_123], pa.date64()), ['"2020-01-01T12:00:00.123"']),
        (
            pa.array([3723, 86400], pa.time32("s")),
            [
                '"01:02:03"',
                '"ERROR: Cast error: Failed to convert 86400 to temporal for Time32(s)"',
            ],
        ),
        (pa.array([3_723_500_001], pa.time64("us")), ['"01:02:03.500001"']),
        (
            pa.array([0, 42, 1500, -1, 3_628_800_000, None], pa.duration("ms")),
            ['"P0D"', '"PT0.042S"', '"PT1.5S"', '"-PT0.001S"', '"PT3628800S"', "null"],
        ),
        (
            pa.array(
                [(1, 2, 3_000_000_000), (0, 0, 0), (0, 0, -1_500_000_000)],
                pa.month_day_nano_interval(),
            ),
            ['"1 mons 2 days 3.000000000 secs"', '"0 secs"', '"-1.500000000 secs"'],
        ),
        (
            pa.array(["2020-01-01T00:00:00"], pa.string()).cast(pa.timestamp("us")),
            ['"2020-01-01T00:00:00"'],
        ),
        (pa.array([0], pa.timestamp("s", "+05:30")), ['"1970-01-01T05:30:00+05:30"']),
    ]
    for array, expected in cases:
        assert render_column(array, Style()).to_pylist() == expected, array.type


def test_other_types() -> None:
    cases = [
        (pa.array([True, None]), ["true", "null"]),
        (pa.array([2**64 - 1], pa.uint64()), ["18446744073709551615"]),
        (pa.array([-(2**63)], pa.int64()), ["-9223372036854775808"]),
        (pa.array([1.5, float("nan"), float("-inf")]), ["1.5", "null", "null"]),
        (pa.array([1.5], pa.float16()), ["1.5"]),
        (pa.nulls(2), ["null", "null"]),
        (pa.array(["a", "b", "a"]).dictionary_encode(), ['"a"', '"b"', '"a"']),
        (
            pa.array([[("k", 1), ("a", 2), ("k", 3)], None], pa.map_(pa.string(), pa.int64())),
            ['{"a":2,"k":3}', "null"],
        ),
        (
            pa.array([[1], [2, 3], [4, 5, 6], None], pa.list_(pa.int64())).slice(1, 3),
            ["[2,3]", "[4,5,6]", "null"],
        ),
        (pa.array([b"ab", b"cd"]).slice(1), ['"6364"']),
    ]
    for array, expected in cases:
        assert render_column(array, Style()).to_pylist() == expected, array.type


def test_strings_canonical_form_is_ascii() -> None:
    array = pa.array(["é❤𝄞", "\x7f\x00", "a/b'"])
    assert render_column(array, Style(canonical=True)).to_pylist() == [
        '"\\u00e9\\u2764\\ud834\\udd1e"',
        '"\\u007f\\u0000"',
        '"a/b\'"',
    ]
    assert render_column(array, Style()).to_pylist() == ['"é❤𝄞"', '"\x7f\\u0000"', '"a/b\'"']


def test_floats_with_few_decimals_follow_the_scalar_rules() -> None:
    """Values the re-read gives back unchanged (``m / 10**k``, fixed notation) skip it: their
    texts are still the scalar rules' (the ``.0`` of whole numbers, exponents 10..14 laid out
    as serde_json lays them; canonical ``d.dddE<exp>`` digits and exponents taken from the
    integers), and a column with one other value takes the full path."""
    from protocol.query.render.floats import _fixed_places

    rng = np.random.default_rng(11)
    places = rng.integers(0, 16, 4000)
    whole = rng.integers(1, 10**15, 4000) // 10 ** rng.integers(0, 15, 4000)
    values = [
        float(sign * m / 10**k)
        for sign, m, k in zip(rng.choice([-1, 1], 4000), whole, places, strict=True)
    ]
    values = [v for v in values if 1e-5 <= abs(v) < 9e14]
    values += [1e-5, -1e-5, 9.99999e-5, 1.0, 100.0, 12.34, 1e10, 1.5e10, 123456789012.5]
    values += [8.99999999999999e14, 0.1, 0.7, 99.99, 1e14, 5e-5, 0.00012]
    numbers = np.array(values)
    assert _fixed_places(numbers) is not None
    for canonical in (False, True):
        style = Style(canonical=canonical)
        got = render_column(pa.array(values, pa.float64()), style).to_pylist()
        assert got == [_scalar_float(value, canonical=canonical) for value in values]
        for other in (0.0, 1e-6, 9e14, 0.1 + 0.2, 1e300):
            assert _fixed_places(np.array([*values, other])) is None
            mixed = [*values[:50], other]
            got = render_column(pa.array(mixed, pa.float64()), style).to_pylist()
            assert got == [_scalar_float(value, canonical=canonical) for value in mixed]


def test_an_answer_like_a_dataset_streams_and_reads_back() -> None:
    """The columns of a typical dataset take the row join's pieces (few-decimal floats, strings
    and UTC timestamps without nulls): batch boundaries never show, in any layout, and the
    values read back."""
    rng = np.random.default_rng(8)
    rows = 20_000
    millis = 1_577_880_000_000 + np.sort(rng.integers(0, 10**11, rows))
    millis[::5] -= millis[::5] % 1000  # some without a fraction of a second
    prices = np.round(rng.uniform(-100, 100, rows), 2)
    table = pa.table(
        {
            "event_time": pa.array(millis, pa.timestamp("ms", "UTC")),
            "symbol": pa.array([f"S{i:03d}é" for i in rng.integers(0, 500, rows)]),
            "price": pa.array(prices),
            "seq": pa.array(np.arange(rows)),
        }
    )
    whole = table.combine_chunks().to_batches()
    pieces = table.to_batches(max_chunksize=8_192)
    for data_format in DataFormat:
        text = _write(pieces, data_format)
        assert text == _write(whole, data_format)
        assert _canonical(pieces, data_format) == _canonical(whole, data_format)
    rows_read = json.loads(_write(pieces, DataFormat.JSON_AOS))
    assert [row["price"] for row in rows_read] == prices.tolist()
    assert [row["symbol"] for row in rows_read] == table.column("symbol").to_pylist()
    expected_times = [
        _expected_timestamp(int(value), 1_000, "UTC") for value in millis[:: rows // 100]
    ]
    assert [json.dumps(row["event_time"]) for row in rows_read[:: rows // 100]] == expected_times
