"""Dates, times, timestamps, durations and intervals as the reference prints them (arrow-rs's
default display, i.e. chrono's formats), vectorized.

- Timestamps with a time zone: RFC 3339 in that zone, fractional seconds with 0, 3, 6 or 9
  digits (whichever shows the value exactly), ``Z`` for a zero offset, else ``+HH:MM`` (seconds
  of historical offsets rounded to the minute). The zone is a fixed offset (``+05:30``,
  ``+0530``, ``+05``) or an IANA name.
- Timestamps without one, and Date64: the same without the offset (``2020-01-01T12:00:00``).
- Date32: ``2020-01-01``. Years outside 0..=9999 carry a sign and at least four digits
  (``+10000``, ``-0001``), as ISO 8601 requires.
- Time32/Time64: ``12:00:00.5`` is written ``12:00:00.500``; values outside a day are the
  display error text arrow-rs writes in their place.
- Durations: ISO 8601 seconds (``PT3628800S``, ``PT0.042S``, ``-PT1S``, ``P0D``).
- Month-day-nano intervals: ``1 mons 2 days 3.000000000 secs`` (PostgreSQL-like).

Texts are laid out in a byte matrix with integer arithmetic (``text.from_matrix``); the rare
values outside the fixed layout (far years) are redone in Python.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from protocol.query.errors import RenderError
from protocol.query.render.text import (
    TEXT,
    Indexed,
    Piece,
    from_matrix,
    join,
    map_values,
    merged_constants,
    validity,
    with_nulls,
)

_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_UNIT_NAMES = {"s": "s", "ms": "ms", "us": "µs", "ns": "ns"}
_SECONDS_PER_DAY = 86_400
_ZERO = 48


def render_temporal(array: pa.Array) -> pa.LargeStringArray:
    """JSON strings of a temporal column (``null`` for nulls)."""
    kind = array.type
    valid = validity(array)
    if pa.types.is_timestamp(kind):
        texts = _timestamps(array, kind.unit, kind.tz)
    elif pa.types.is_date32(kind):
        texts = join(['"', _dates_of(_ints(array)), '"'])
    elif pa.types.is_date64(kind):
        seconds, nanos = _split(_ints(array), 1_000)
        texts = _datetimes(seconds, nanos, time=True, per_second=1_000)
    elif pa.types.is_time32(kind) or pa.types.is_time64(kind):
        texts = _times(array, kind.unit)
    elif pa.types.is_duration(kind):
        texts = _durations(array, kind.unit)
    elif pa.types.is_interval(kind):
        return map_values(array, _interval_text, valid)
    else:
        raise TypeError(f"{kind} is not a temporal type")
    return with_nulls(texts, valid)


def _ints(array: pa.Array) -> np.ndarray:
    """The stored integers (nulls as 0)."""
    width = pa.int32() if array.type.bit_width == 32 else pa.int64()
    storage = array.view(width) if array.type != width else array
    return np.asarray(storage.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _split(values: np.ndarray, per_second: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole seconds (floored) and the nanoseconds past them."""
    seconds = np.floor_divide(values, per_second)
    nanos = (values - seconds * per_second) * (1_000_000_000 // per_second)
    return seconds, nanos


def _timestamps(array: pa.Array, unit: str, zone: str | None) -> pa.LargeStringArray:
    return join(timestamp_pieces(array, unit, zone))


def timestamp_pieces(array: pa.Array, unit: str, zone: str | None) -> list[Piece]:
    """The JSON strings of a timestamp column as pieces of a ``join`` (nulls not handled)."""
    raw = _ints(array)
    per_second = _UNITS_PER_SECOND[unit]
    seconds, nanos = _split(raw, per_second)
    if zone is None:
        return _datetime_pieces(seconds, nanos, time=True, per_second=per_second)
    offsets = _offsets(seconds, zone)
    return _datetime_pieces(
        seconds + offsets, nanos, time=True, per_second=per_second, offsets=offsets
    )


_ARROW_ZONE_HORIZON = 2_114_380_800
"""2037-01-01T00:00:00Z: Arrow's zone database has no transitions past 2037."""
_CHRONO_TZ_HORIZON = 4_102_444_799
"""2099-12-31T23:59:59Z: the reference's zone tables end with 2099; later instants keep the
offset in force then."""


_UTC_ZONES = frozenset({"UTC", "Etc/UTC"})
"""Zone names whose offset is zero at every instant (the usual zone of event and system times):
known without asking the zone database row by row."""


def _offsets(seconds: np.ndarray, zone: str) -> np.ndarray:
    """The zone's UTC offset (seconds) at each instant."""
    fixed = 0 if zone in _UTC_ZONES else fixed_offset(zone)
    if fixed is not None:
        return np.full(len(seconds), fixed, dtype=np.int64)
    instants = pa.array(np.minimum(seconds, _ARROW_ZONE_HORIZON), pa.timestamp("s", tz=zone))
    try:
        local = pc.local_timestamp(instants)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise RenderError(f"unknown time zone {zone!r}: {error}") from None
    offsets = _ints(local) - np.minimum(seconds, _ARROW_ZONE_HORIZON)
    late = np.flatnonzero(seconds >= _ARROW_ZONE_HORIZON)
    if late.size:
        offsets[late] = _late_offsets(seconds[late], zone)
    return np.asarray(offsets, dtype=np.int64)


def _late_offsets(seconds: np.ndarray, zone: str) -> np.ndarray:
    """Offsets from 2037 on, from the zone's rules as Python knows them."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        info = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise RenderError(f"unknown time zone {zone!r}: {error}") from None
    distinct, index = np.unique(np.minimum(seconds, _CHRONO_TZ_HORIZON), return_inverse=True)
    known = []
    for instant in distinct.tolist():
        offset = datetime.fromtimestamp(instant, UTC).astimezone(info).utcoffset()
        known.append(int(offset.total_seconds()) if offset is not None else 0)
    return np.array(known, dtype=np.int64)[index.reshape(-1)]


def fixed_offset(zone: str) -> int | None:
    """Seconds east of UTC for ``+HH:MM``, ``+HHMM`` or ``+HH`` (as arrow-rs parses them)."""
    if len(zone) == 6 and zone[3] == ":":
        digits = zone[1:3] + zone[4:6]
    elif len(zone) == 5:
        digits = zone[1:5]
    elif len(zone) == 3:
        digits = zone[1:3] + "00"
    else:
        return None
    if zone[0] not in "+-" or not all("0" <= char <= "9" for char in digits):
        return None
    seconds = int(digits[:2]) * 3600 + int(digits[2:]) * 60
    if seconds >= _SECONDS_PER_DAY:
        return None
    return seconds if zone[0] == "+" else -seconds


def civil(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Proleptic Gregorian year, month and day of days since 1970-01-01."""
    shifted = days + 719_468
    era = np.floor_divide(shifted, 146_097)
    day_of_era = shifted - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = np.where(month_index < 10, month_index + 3, month_index - 9)
    year = year_of_era + era * 400 + (month <= 2)
    return year, month, day


def _datetimes(
    seconds: np.ndarray,
    nanos: np.ndarray,
    *,
    time: bool,
    per_second: int = 1_000_000_000,
    offsets: np.ndarray | None = None,
) -> pa.LargeStringArray:
    return join(_datetime_pieces(seconds, nanos, time=time, per_second=per_second, offsets=offsets))


def _datetime_pieces(
    seconds: np.ndarray,
    nanos: np.ndarray,
    *,
    time: bool,
    per_second: int = 1_000_000_000,
    offsets: np.ndarray | None = None,
) -> list[Piece]:
    """``"YYYY-MM-DD[THH:MM:SS[.fff]][Z|+HH:MM]"`` of local seconds since the epoch: each part is
    picked from a small table of texts (the days present, the seconds of a day, three-digit
    groups) as the parts are joined row by row, quotes included."""
    days = np.floor_divide(seconds, _SECONDS_PER_DAY)
    pieces: list[Piece] = ['"', _dates_of(days)]
    if time:
        of_day = seconds - days * _SECONDS_PER_DAY
        pieces += ["T", Indexed(_clock_texts(), of_day, 8), _fractions(nanos, per_second)]
    if offsets is not None:
        pieces.append(_offset_texts(offsets))
    pieces.append('"')
    return merged_constants(pieces)


def _dates_of(days: np.ndarray) -> Indexed:
    """The date text of each day number, through a table of the days present."""
    low, high = int(days.min()), int(days.max())
    if high - low < max(4 * len(days), 4096):
        table_days = np.arange(low, high + 1, dtype=np.int64)
        index = days - low
    else:
        table_days, index = np.unique(days, return_inverse=True)
    return Indexed(date_texts(table_days), index.reshape(-1))


def date_texts(days: np.ndarray) -> pa.LargeStringArray:
    """chrono's text of each date: ``YYYY-MM-DD``, the year signed and widened outside
    0..=9999."""
    year, month, day = civil(days)
    matrix = np.zeros((len(days), 10), dtype=np.uint8)
    _digits(matrix, 0, year, 4)
    matrix[:, 4] = ord("-")
    _digits(matrix, 5, month, 2)
    matrix[:, 7] = ord("-")
    _digits(matrix, 8, day, 2)
    texts = from_matrix(matrix, np.full(len(days), 10, dtype=np.int64))
    far = np.flatnonzero((year < 0) | (year > 9999))
    if far.size == 0:
        return texts
    redone = [f"{int(year[row]):+05d}-{int(month[row]):02d}-{int(day[row]):02d}" for row in far]
    mask = np.zeros(len(days), dtype=bool)
    mask[far] = True
    result = pc.replace_with_mask(texts, pa.array(mask), pa.array(redone, TEXT))
    assert isinstance(result, pa.LargeStringArray)
    return result


def _digits(matrix: np.ndarray, column: int, values: np.ndarray, width: int) -> None:
    """``values`` zero-padded to ``width`` digits at ``column`` (higher digits dropped)."""
    remaining = np.abs(values)
    for place in range(width - 1, -1, -1):
        matrix[:, column + place] = remaining % 10 + _ZERO
        remaining = remaining // 10


@functools.cache
def _clock_texts() -> pa.LargeStringArray:
    """``HH:MM:SS`` of every second of a day."""
    of_day = np.arange(_SECONDS_PER_DAY, dtype=np.int64)
    matrix = np.zeros((_SECONDS_PER_DAY, 8), dtype=np.uint8)
    _digits(matrix, 0, of_day // 3600, 2)
    matrix[:, 2] = ord(":")
    _digits(matrix, 3, of_day // 60 % 60, 2)
    matrix[:, 5] = ord(":")
    _digits(matrix, 6, of_day % 60, 2)
    return from_matrix(matrix, np.full(_SECONDS_PER_DAY, 8, dtype=np.int64))


@functools.cache
def _three_digits() -> pa.LargeStringArray:
    """``000`` to ``999``."""
    return pa.array([f"{value:03d}" for value in range(1000)], TEXT)


@functools.cache
def _millis_fractions() -> pa.LargeStringArray:
    """``""`` (no fraction), then ``.001`` to ``.999``."""
    return pa.array(["", *(f".{value:03d}" for value in range(1, 1000))], TEXT)


def _fractions(nanos: np.ndarray, per_second: int) -> Piece:
    """chrono's automatic fraction of a second: none, 3, 6 or 9 digits, whichever shows the
    value exactly."""
    if per_second == 1 or not nanos.any():
        return ""
    if per_second == 1_000:  # whole milliseconds: none or 3 digits
        return Indexed(_millis_fractions(), nanos // 1_000_000)
    groups = _three_digits()
    millis = groups.take(pa.array(nanos // 1_000_000))
    fraction = pc.if_else(pa.array(nanos == 0), "", join([".", millis]))
    if per_second > 1_000:
        micros = join([".", millis, groups.take(pa.array(nanos // 1_000 % 1_000))])
        fraction = pc.if_else(pa.array(nanos % 1_000_000 != 0), micros, fraction)
    if per_second > 1_000_000:
        nano = join([micros, groups.take(pa.array(nanos % 1_000))])
        fraction = pc.if_else(pa.array(nanos % 1_000 != 0), nano, fraction)
    return fraction


def _offset_texts(offsets: np.ndarray) -> pa.Array | str:
    """``Z`` for a zero offset, else ``+HH:MM`` (seconds rounded to the nearest minute)."""
    if not offsets.any():
        return "Z"
    distinct, index = np.unique(offsets, return_inverse=True)
    texts = []
    for offset in distinct.tolist():
        if offset == 0:
            texts.append("Z")
            continue
        minutes = (abs(offset) + 30) // 60
        texts.append(f"{'-' if offset < 0 else '+'}{minutes // 60:02d}:{minutes % 60:02d}")
    return pa.array(texts, TEXT).take(pa.array(index.reshape(-1)))


def _times(array: pa.Array, unit: str) -> pa.LargeStringArray:
    raw = _ints(array)
    per_second = _UNITS_PER_SECOND[unit]
    inside = (raw >= 0) & (raw < _SECONDS_PER_DAY * per_second)
    seconds, nanos = _split(np.where(inside, raw, 0), per_second)
    clock = _clock_texts().take(pa.array(seconds))
    texts = join(merged_constants(['"', clock, _fractions(nanos, per_second), '"']))
    valid = np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    outside = np.flatnonzero(~inside & valid)
    if outside.size:
        bits = "32" if pa.types.is_time32(array.type) else "64"
        errors = [
            f'"ERROR: Cast error: Failed to convert {int(raw[row])} to temporal for '
            f'Time{bits}({_UNIT_NAMES[unit]})"'
            for row in outside
        ]
        mask = np.zeros(len(raw), dtype=bool)
        mask[outside] = True
        texts = pc.replace_with_mask(texts, pa.array(mask), pa.array(errors, TEXT))
    return texts


def _durations(array: pa.Array, unit: str) -> pa.LargeStringArray:
    """chrono's ISO 8601 form: ``[-]PT<seconds>[.<fraction without trailing zeros>]S``."""
    raw = _ints(array)
    per_second = _UNITS_PER_SECOND[unit]
    negative = raw < 0
    magnitude = np.where(negative, (-(raw + 1)).astype(np.uint64) + 1, raw.astype(np.uint64))
    seconds = magnitude // np.uint64(per_second)
    fraction = magnitude % np.uint64(per_second)
    padded = pa.array(fraction + np.uint64(per_second)).cast(pa.string())
    digits = pc.utf8_rtrim(pc.utf8_slice_codeunits(padded, 1), characters="0")
    has_fraction = pa.array(fraction > 0)
    fraction_text = pc.if_else(has_fraction, join([".", digits]), pa.scalar("", TEXT))
    sign = pc.if_else(pa.array(negative), pa.scalar("-", TEXT), pa.scalar("", TEXT))
    texts = join(['"', sign, "PT", pa.array(seconds).cast(pa.string()), fraction_text, 'S"'])
    zero = pa.array(magnitude == 0)
    texts = pc.if_else(zero, pa.scalar('"P0D"', TEXT), texts)
    invalid = _invalid_durations(raw, unit)
    if invalid.any():
        texts = pc.if_else(pa.array(invalid), pa.scalar('"<invalid>"', TEXT), texts)
    return with_nulls(texts, None)


def _invalid_durations(raw: np.ndarray, unit: str) -> np.ndarray:
    """Values chrono's time delta cannot hold (seconds beyond i64::MAX milliseconds)."""
    limit = np.iinfo(np.int64).max // 1000
    if unit == "s":
        return np.asarray((raw > limit) | (raw < -limit), dtype=bool)
    if unit == "ms":
        return np.asarray(raw == np.iinfo(np.int64).min, dtype=bool)
    return np.zeros(len(raw), dtype=bool)


def _interval_text(value: object) -> str:
    """arrow-rs's text of a month-day-nano interval."""
    months: int = getattr(value, "months")  # noqa: B009 (pyarrow's MonthDayNano is untyped)
    days: int = getattr(value, "days")  # noqa: B009
    nanos: int = getattr(value, "nanoseconds")  # noqa: B009
    if months == 0 and days == 0 and nanos == 0:
        return '"0 secs"'
    parts = []
    if months:
        parts.append(f"{months} mons")
    if days:
        parts.append(f"{days} days")
    if nanos:
        seconds = int(nanos / 1_000_000_000)  # truncated toward zero, as Rust divides
        rest = nanos - seconds * 1_000_000_000
        minutes = int(seconds / 60)
        hours = int(minutes / 60)
        seconds -= minutes * 60
        minutes -= hours * 60
        if hours:
            parts.append(f"{hours} hours")
        if minutes:
            parts.append(f"{minutes} mins")
        if seconds or rest:
            sign = "-" if seconds < 0 or rest < 0 else ""
            parts.append(f"{sign}{abs(seconds)}.{abs(rest):09d} secs")
    return '"' + " ".join(parts) + '"'
