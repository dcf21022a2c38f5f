"""Cron5 schedules (``minute hour day-of-month month day-of-week``, or ``@hourly``, ``@daily``,
``@weekly``, ``@monthly``, ``@yearly``), as ``Schedule`` triggers write them, in UTC.

Fields take ``*``, numbers, ranges ``a-b``, steps ``*/n`` and ``a-b/n``, and lists; day-of-week
0 and 7 are Sunday. As in Vixie cron, when both day fields are restricted a day matching either
fires. Small enough to keep here rather than add a dependency; an invalid expression raises
:class:`CronError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from odfd.errors import OdfdError

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
_HORIZON = timedelta(days=366 * 5)


class CronError(OdfdError):
    """A cron expression this node cannot read."""


def _field(text: str, name: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        try:
            step = int(step_text) if slash else 1
            if base == "*":
                start, end = low, high
            elif "-" in base:
                start, end = (int(x) for x in base.split("-", 1))
            else:
                start = int(base)
                end = high if slash else start
        except ValueError:
            raise CronError(f"{name} field {text!r} is not a number, range or step") from None
        if step < 1 or not low <= start <= end <= high:
            raise CronError(f"{name} field {text!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 = Sunday."""
    any_day: bool
    any_weekday: bool

    @property
    def five_fields(self) -> str:
        """The expression as minute hour day-of-month month day-of-week (a macro spelled out)."""
        return _MACROS.get(self.expression.strip().lower(), self.expression.strip())

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        parts = _MACROS.get(expression.strip().lower(), expression.strip()).split()
        if len(parts) != 5:
            raise CronError(
                f"{expression!r} is not a cron5 expression: expected 5 fields "
                "(minute hour day-of-month month day-of-week) or @hourly/@daily/@weekly/"
                "@monthly/@yearly"
            )
        fields = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in fields[4])
        return cls(
            expression,
            fields[0],
            fields[1],
            fields[2],
            fields[3],
            weekdays,
            parts[2] == "*",
            parts[4] == "*",
        )

    def _day_matches(self, moment: datetime) -> bool:
        in_month = moment.day in self.days
        in_week = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def next_after(self, moment: datetime) -> datetime:
        """The first firing time strictly after ``moment`` (which keeps its timezone)."""
        at = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        end = moment + _HORIZON
        while at <= end:
            if at.month not in self.months:
                at = (at.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self._day_matches(at):
                at = at.replace(hour=0, minute=0) + timedelta(days=1)
            elif at.hour not in self.hours:
                at = at.replace(minute=0) + timedelta(hours=1)
            elif at.minute not in self.minutes:
                at += timedelta(minutes=1)
            else:
                return at
        raise CronError(f"{self.expression!r} never fires")
