"""Timestamps keep nanoseconds and print/parse RFC 3339 exactly as the reference (chrono) does."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import ParseError
from protocol.model import Timestamp


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (0, "2020-01-01T12:00:00Z"),
        (500_000_000, "2020-01-01T12:00:00.500Z"),
        (123_456_000, "2020-01-01T12:00:00.123456Z"),
        (1, "2020-01-01T12:00:00.000000001Z"),
    ],
)
def test_format_uses_3_6_or_9_fraction_digits(nanos: int, text: str) -> None:
    assert Timestamp.of(2020, 1, 1, 12, 0, 0, nanos).to_rfc3339() == text
    assert Timestamp.parse_rfc3339(text) == Timestamp.of(2020, 1, 1, 12, 0, 0, nanos)


@pytest.mark.parametrize(
    "text",
    [
        "2020-01-01T14:30:00+02:30",
        "2020-01-01t12:00:00z",
        "2020-01-01 12:00:00Z",
        "2020-01-01T11:00:00-01:00",
    ],
)
def test_parse_accepts_offsets_and_separators(text: str) -> None:
    assert Timestamp.parse_rfc3339(text) == Timestamp.of(2020, 1, 1, 12)


@pytest.mark.parametrize(
    "text",
    ["2020-01-01", "2020-13-01T00:00:00Z", "2020-01-01T00:00:00", "x", "2020-01-01T00:00:60Z"],
)
def test_parse_rejects_invalid(text: str) -> None:
    with pytest.raises(ParseError):
        Timestamp.parse_rfc3339(text)


def test_flatbuffers_parts_of_leap_day() -> None:
    stamp = Timestamp.of(2024, 12, 31, 23, 59, 59, 999_999_999)
    assert stamp.to_fb_parts() == (2024, 366, 86_399, 999_999_999)
    assert Timestamp.from_fb_parts(*stamp.to_fb_parts()) == stamp
    with pytest.raises(ParseError):
        Timestamp.from_fb_parts(2023, 366, 0, 0)


@given(st.integers(min_value=-(10**18) * 60, max_value=10**18 * 200))
def test_conversions_round_trip(nanos: int) -> None:
    stamp = Timestamp(nanos)
    assert Timestamp.parse_rfc3339(stamp.to_rfc3339()) == stamp
    assert Timestamp.from_fb_parts(*stamp.to_fb_parts()) == stamp
    assert Timestamp.from_datetime(stamp.to_datetime()).epoch_nanos == nanos - nanos % 1000


def test_datetime_conversion_and_order() -> None:
    moment = datetime(2021, 6, 1, 8, 30, tzinfo=timezone(timedelta(hours=2)))
    stamp = Timestamp.from_datetime(moment)
    assert stamp == Timestamp.of(2021, 6, 1, 6, 30)
    assert stamp.to_datetime() == moment
    assert Timestamp.from_epoch_millis(stamp.epoch_millis) == stamp
    assert Timestamp(1) < Timestamp(2) and len({Timestamp(5), Timestamp(5)}) == 1
    with pytest.raises(ParseError):
        Timestamp.from_datetime(datetime(2021, 1, 1))
