"""Canonical JSON as the ``canonical_json`` 0.7 crate writes it (its test_to_string vectors),
floats as serde_json's writer (zmij 1.0.23: its dtoa/ftoa tests) writes them and as its default
reader reads them, and strict JSON reading."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from protocol.query.canonical_json import canonical_json
from protocol.query.errors import RequestError
from protocol.query.floats import (
    NumberOutOfRange,
    canonical_text,
    from_parts,
    read_number,
    reread,
    wire_text,
)
from protocol.query.json_text import dumps, loads

CANONICAL_VECTORS = [
    (None, "null"),
    (math.nan, "null"),
    (math.inf, "null"),
    (-math.inf, "null"),
    (True, "true"),
    (False, "false"),
    (0, "0"),
    (123, "123"),
    (-123, "-123"),
    (23.1, "2.31E1"),
    (23, "23"),
    (1.0, "1E0"),
    (0.0, "0E0"),
    (23.0, "2.3E1"),
    (-23.0, "-2.3E1"),
    (2300, "2300"),
    (0.00099, "9.9E-4"),
    (0.000011, "1.1E-5"),
    (0.0000011, "1.1E-6"),
    (0.000001, "1E-6"),
    (5.6, "5.6E0"),
    (0.00000099, "9.9E-7"),
    (0.0000001, "1E-7"),
    (0.000000930258908, "9.30258908E-7"),
    (0.00000000000068272, "6.8272E-13"),
    (10.0**21, "1E21"),
    (10.0**20, "1E20"),
    (10.0**15 + 0.1, "1.0000000000000001E15"),
    (10.0**16 * 1.1, "1.1E16"),
    ("", '""'),
    (" Preserve single quotes'in string", '" Preserve single quotes\'in string"'),
    (' Escapes quotes " ', r'" Escapes quotes \" "'),
    ("This\\and this", r'"This\\and this"'),
    ("I ❤ testing", r'"I \u2764 testing"'),
    ("This is a sentence.\n", r'"This is a sentence.\n"'),
    ("This is a \t tab.", r'"This is a \t tab."'),
    ("This is a \r carriage return char.", r'"This is a \r carriage return char."'),
    ("image/jpeg", '"image/jpeg"'),
    ("frequency at 10.0e+04", '"frequency at 10.0e+04"'),
    ("I \\u{} testing", r'"I \\u{} testing"'),
    ("I \\u{1234 testing", r'"I \\u{1234 testing"'),
    ("𝄞", r'"\ud834\udd1e"'),
    ("𝗠𝗼𝘇", r'"\ud835\udde0\ud835\uddfc\ud835\ude07"'),
    ("\U00010000 \U0010ffff", r'"\ud800\udc00 \udbff\udfff"'),
    ({"a": {}, "b": "b"}, '{"a":{},"b":"b"}'),
    ({"a": "a", "id": "1", "b": "b"}, '{"a":"a","b":"b","id":"1"}'),
    ({"é": "check"}, r'{"\u00e9":"check"}'),
    ([], "[]"),
    (["one", "two", "three"], '["one","two","three"]'),
    ([{"key": "✓"}], r'[{"key":"\u2713"}]'),
    ([{"key": "ę"}], r'[{"key":"\u0119"}]'),
    (
        {
            "def": "bar",
            "abc": 0.000000930258908,
            "ghi": 1000000000000000000000.0,
            "rust": "❤",
            "zoo": ["zorilla", "anteater"],
        },
        r'{"abc":9.30258908E-7,"def":"bar","ghi":1E21,"rust":"\u2764",'
        r'"zoo":["zorilla","anteater"]}',
    ),
    ("\x7f\x00\x1f\x08\x0c", r'"\u007f\u0000\u001f\b\f"'),
    (-0.0, "-0E0"),
]


@pytest.mark.parametrize(("value", "expected"), CANONICAL_VECTORS)
def test_canonical_json_crate_vectors(value: object, expected: str) -> None:
    """canonical_json 0.7 ``tests::test_to_string`` (plus DEL, controls and -0.0)."""
    assert canonical_json(value) == expected.encode()


def test_canonical_keys_sort_by_code_point() -> None:
    """Keys sort by their UTF-8 bytes (= code points), not UTF-16 units as RFC 8785 says."""
    value = {"\U0001f600": 1, "\uff61": 2, "z": 3}
    assert canonical_json(value) == rb'{"z":3,"\uff61":2,"\ud83d\ude00":1}'


ZMIJ_F64 = [
    (6.62607015e-34, "6.62607015e-34"),
    (5.444310685350916e14, "544431068535091.6"),
    (5e-324, "5e-324"),
    (1e-323, "1e-323"),
    (1.2e-322, "1.2e-322"),
    (2.2250738585072004e-308, "2.2250738585072004e-308"),
    (1.0, "1.0"),
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (-4.932096661796888e-226, "-4.932096661796888e-226"),
    (3.439070283483335e35, "3.439070283483335e+35"),
    (6.606854224493745e-17, "6.606854224493745e-17"),
    (6.079537928711555e61, "6.079537928711555e+61"),
    (43210.0, "43210.0"),
    (43210.1, "43210.1"),
    (10000.0, "10000.0"),
    (-5942736479622170.0, "-5942736479622170.0"),
    (1e16, "1e+16"),
    (1e15, "1000000000000000.0"),
    (0.00001, "0.00001"),
    (0.000001, "1e-6"),
    (2537.07, "2537.07"),
]


@pytest.mark.parametrize(("value", "expected"), ZMIJ_F64)
def test_float_writer(value: float, expected: str) -> None:
    """zmij's dtoa tests (serde_json 1.0.151 writes floats with zmij 1.0.23)."""
    assert wire_text(value) == expected


def test_float32_values_are_written_with_their_own_digits() -> None:
    """A float32 column's values are printed with float32's shortest digits, then read back as
    doubles (zmij's ftoa tests give the digits)."""
    assert wire_text(reread(0.1, single=True)) == "0.1"
    assert wire_text(reread(1.342178e08, single=True)) == "134217800.0"
    assert wire_text(reread(6.62607e-34, single=True)) == "6.62607e-34"
    assert canonical_text(reread(1e-45, single=True)) == "1.0000000000000001E-45"


def test_default_reader_is_not_always_correctly_rounded() -> None:
    """serde_json without ``float_roundtrip``: the digits become an integer, converted once and
    scaled once, so long texts can come back one unit off; texts of up to 15 digits and powers
    of ten up to 22 never do."""
    assert from_parts(12345, -2) == 123.45
    assert reread(6.862973553954668e-08) == 6.862973553954669e-08
    rng = random.Random(7)
    for _ in range(2000):
        digits = rng.randrange(1, 10**15)
        power = rng.randrange(-22, 23)
        assert from_parts(digits, power) == float(f"{digits}e{power}")


def test_reread_of_random_doubles_stays_close() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        (value,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
        if not math.isfinite(value):
            continue
        again = reread(value)
        assert math.isinf(again) or abs(again - value) <= 2 * math.ulp(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("-0", -0.0),
        ("18446744073709551615", 18446744073709551615),
        ("18446744073709551616", 1.8446744073709552e19),
        ("-9223372036854775808", -9223372036854775808),
        ("-9223372036854775809", -9.223372036854776e18),
        ("1.5", 1.5),
        ("1e2", 100.0),
        ("1E-400", 0.0),
        ("123456789012345678901234567890.5", 1.2345678901234568e29),
    ],
)
def test_json_numbers_read_as_serde_json_reads_them(text: str, expected: int | float) -> None:
    value = read_number(text)
    assert type(value) is type(expected) and value == expected
    if isinstance(expected, float):
        assert math.copysign(1, value) == math.copysign(1, expected)


def test_numbers_out_of_range_are_refused() -> None:
    with pytest.raises(NumberOutOfRange):
        read_number("1e400")
    with pytest.raises(RequestError, match="number out of range"):
        loads(b"[1e999]")


def test_wire_json_keeps_order_and_escapes_like_serde_json() -> None:
    value = {"b": 'é\n"', "a": [1, 2.5, None, True], "c": 1e16}
    assert dumps(value) == '{"b":"é\\n\\"","a":[1,2.5,null,true],"c":1e+16}'
    assert json.loads(dumps(value)) == value
