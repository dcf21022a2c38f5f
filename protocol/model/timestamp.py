"""UTC timestamps with nanosecond precision, as the reference (chrono) keeps them.

Python's ``datetime`` stops at microseconds, but the FlatBuffers ``Timestamp`` struct carries
nanoseconds and a block's hash depends on them, so the model stores whole nanoseconds since the
Unix epoch and converts at the edges.
"""

from __future__ import annotations

import inspect
import re
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from protocol.errors import ParseError

_NS_PER_S = 1_000_000_000
_NS_PER_DAY = 86_400 * _NS_PER_S
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MIN_NS = (date(1, 1, 1).toordinal() - _EPOCH_ORDINAL) * _NS_PER_DAY
_MAX_NS = (date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL + 1) * _NS_PER_DAY - 1

_YEAR_DAYS: dict[int, tuple[int, int]] = {}
"""(year, day of year) of recently converted days since the epoch: blocks of a chain share few days."""

_EPOCH_DAYS: dict[int, int] = {}
"""Days since the epoch of recently decoded days, keyed ``year << 16 | day of year`` (a 16-bit field)."""

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """A UTC instant, ``epoch_nanos`` nanoseconds after 1970-01-01T00:00:00Z (years 1 to 9999)."""

    epoch_nanos: int

    def __post_init__(self) -> None:
        if not _MIN_NS <= self.epoch_nanos <= _MAX_NS:
            raise ParseError(
                f"timestamp {self.epoch_nanos} ns since the epoch is outside years 1-9999"
            )

    @classmethod
    def of(
        cls,
        year: int,
        month: int,
        day: int,
        hour: int = 0,
        minute: int = 0,
        second: int = 0,
        nanosecond: int = 0,
    ) -> Timestamp:
        """The UTC instant with these calendar fields."""
        if not 0 <= nanosecond < _NS_PER_S:
            raise ParseError(f"nanosecond {nanosecond} is out of range")
        try:
            days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
        except ValueError as error:
            raise ParseError(f"invalid date {year:04}-{month:02}-{day:02}: {error}") from None
        if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60):
            raise ParseError(f"invalid time {hour:02}:{minute:02}:{second:02}")
        return cls(
            days * _NS_PER_DAY + (hour * 3600 + minute * 60 + second) * _NS_PER_S + nanosecond
        )

    @classmethod
    def now(cls) -> Timestamp:
        return cls(time.time_ns())

    @classmethod
    def from_epoch_millis(cls, millis: int) -> Timestamp:
        return cls(millis * 1_000_000)

    @property
    def epoch_millis(self) -> int:
        """Whole milliseconds since the epoch (rounded down)."""
        return self.epoch_nanos // 1_000_000

    @classmethod
    def from_datetime(cls, value: datetime) -> Timestamp:
        """Convert an aware ``datetime``; a naive one is ambiguous and rejected."""
        if value.tzinfo is None or value.utcoffset() is None:
            raise ParseError(f"datetime {value.isoformat()} has no time zone")
        utc = value.astimezone(UTC)
        days = utc.date().toordinal() - _EPOCH_ORDINAL
        seconds = utc.hour * 3600 + utc.minute * 60 + utc.second
        return cls(days * _NS_PER_DAY + seconds * _NS_PER_S + utc.microsecond * 1000)

    def to_datetime(self) -> datetime:
        """An aware UTC ``datetime``; sub-microsecond digits are dropped (datetime cannot hold them)."""
        days, rest = divmod(self.epoch_nanos, _NS_PER_DAY)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=days, microseconds=rest // 1000)

    @classmethod
    def from_fb_parts(
        cls, year: int, ordinal: int, seconds_from_midnight: int, nanoseconds: int
    ) -> Timestamp:
        """Build from the FlatBuffers struct's fields (year, day of year, seconds, nanoseconds)."""
        if seconds_from_midnight >= 86_400 or nanoseconds >= _NS_PER_S:
            raise ParseError(
                f"timestamp time {seconds_from_midnight}s {nanoseconds}ns is out of range"
            )
        days = _EPOCH_DAYS.get(year << 16 | ordinal)
        if days is None:
            if not 1 <= year <= 9999:
                raise ParseError(f"timestamp year {year} is outside 1-9999")
            days_in_year = 366 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 365
            if not 1 <= ordinal <= days_in_year:
                raise ParseError(f"timestamp day {ordinal} is not a day of year {year}")
            days = date(year, 1, 1).toordinal() - _EPOCH_ORDINAL + ordinal - 1
            if len(_EPOCH_DAYS) < 100_000:
                _EPOCH_DAYS[year << 16 | ordinal] = days
        # In range by the checks above, so the slot is set directly (no ``__init__`` re-check):
        # blocks carry two timestamps each and this runs for every block decoded.
        value = _new_object(cls)
        _set_epoch_nanos(
            value, days * _NS_PER_DAY + seconds_from_midnight * _NS_PER_S + nanoseconds
        )
        return value

    def to_fb_parts(self) -> tuple[int, int, int, int]:
        """(year, day of year, seconds from midnight, nanoseconds), as the FlatBuffers struct stores them."""
        days, rest = divmod(self.epoch_nanos, _NS_PER_DAY)
        year_day = _YEAR_DAYS.get(days)
        if year_day is None:
            year = date.fromordinal(days + _EPOCH_ORDINAL).year
            year_day = (year, days + _EPOCH_ORDINAL - date(year, 1, 1).toordinal() + 1)
            if len(_YEAR_DAYS) < 100_000:
                _YEAR_DAYS[days] = year_day
        seconds, nanos = divmod(rest, _NS_PER_S)
        return year_day[0], year_day[1], seconds, nanos

    @classmethod
    def parse_rfc3339(cls, text: str) -> Timestamp:
        """Parse RFC 3339 as the reference does (``T``/``t``/space, ``Z`` or an offset, 1+ fraction digits)."""
        match = _RFC3339.match(text)
        if match is None:
            raise ParseError(f"{text!r} is not an RFC 3339 timestamp")
        year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
        fraction = match.group(7) or ""
        nanos = int((fraction + "000000000")[:9])
        if second == 60:
            raise ParseError(f"{text!r}: leap seconds are not supported")
        base = cls.of(year, month, day, hour, minute, second, nanos).epoch_nanos
        if match.group(9):
            offset_hours, offset_minutes = int(match.group(10)), int(match.group(11))
            if offset_hours > 23 or offset_minutes > 59:
                raise ParseError(f"{text!r} has an invalid UTC offset")
            offset = (offset_hours * 3600 + offset_minutes * 60) * _NS_PER_S
            base += -offset if match.group(9) == "+" else offset
        return cls(base)

    def to_rfc3339(self) -> str:
        """Format like chrono's ``to_rfc3339_opts(SecondsFormat::AutoSi, true)``: ``2020-01-01T12:00:00Z``,
        with 3, 6 or 9 fraction digits only when needed."""
        days, rest = divmod(self.epoch_nanos, _NS_PER_DAY)
        day = date.fromordinal(days + _EPOCH_ORDINAL)
        seconds, nanos = divmod(rest, _NS_PER_S)
        hour, seconds = divmod(seconds, 3600)
        minute, second = divmod(seconds, 60)
        text = f"{day.year:04}-{day.month:02}-{day.day:02}T{hour:02}:{minute:02}:{second:02}"
        if nanos:
            if nanos % 1_000_000 == 0:
                text += f".{nanos // 1_000_000:03}"
            elif nanos % 1000 == 0:
                text += f".{nanos // 1000:06}"
            else:
                text += f".{nanos:09}"
        return text + "Z"

    def __str__(self) -> str:
        return self.to_rfc3339()

    def __repr__(self) -> str:
        return f"Timestamp({self.to_rfc3339()})"


_new_object = object.__new__
_set_epoch_nanos = inspect.getattr_static(Timestamp, "epoch_nanos").__set__  # the slot's descriptor
