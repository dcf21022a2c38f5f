"""How catalog columns hold values: instants as RFC 3339 UTC text with microseconds (which sorts
as it compares), hashes as their canonical multibase; ``None`` as NULL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from protocol.identity import Multihash

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def to_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_FORMAT)


def now_text() -> str:
    return to_text(datetime.now(UTC))


@overload
def from_text(text: str) -> datetime: ...
@overload
def from_text(text: None) -> None: ...
def from_text(text: str | None) -> datetime | None:
    """A NOT NULL column gives a ``datetime``, a nullable one ``datetime | None``.

    ``fromisoformat`` reads ``to_text``'s form some 50x faster than ``strptime``, which matters
    when ``odfd status`` or the daemon's start reads 10,000 mirrors of several instants each."""
    if text is None:
        return None
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def hash_to_text(value: Multihash | None) -> str | None:
    return None if value is None else value.to_multibase()


@overload
def hash_from_text(text: str) -> Multihash: ...
@overload
def hash_from_text(text: None) -> None: ...
def hash_from_text(text: str | None) -> Multihash | None:
    return None if text is None else Multihash.from_multibase(text)
