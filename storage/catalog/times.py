"""How the catalog writes instants: RFC 3339 UTC text with microseconds, which sorts as it compares."""

from __future__ import annotations

from datetime import UTC, datetime

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def to_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_FORMAT)


def now_text() -> str:
    return to_text(datetime.now(UTC))


def from_text(text: str | None) -> datetime | None:
    return None if text is None else datetime.strptime(text, _FORMAT).replace(tzinfo=UTC)
