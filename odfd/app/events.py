"""Progress events of use cases: what a use case reports while it works (a dataset added, a
pull retried), for whoever called it to show: the CLI prints them as status lines, a server may
log or stream them. Events are frozen dataclasses of plain values, so each has a stable JSON form
(``to_json``: its fields and its ``event`` name)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol


class Event:
    """Base of the events; a subclass is a frozen dataclass naming itself in ``name``."""

    name: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, **dataclasses.asdict(self)}  # type: ignore[call-overload]  # subclasses are dataclasses


class EventSink(Protocol):
    """Receives a use case's events, in order, on the caller's thread."""

    def emit(self, event: Event) -> None: ...


class DiscardEvents:
    """A sink for callers that show no progress (a flow's task, the console's row detail)."""

    def emit(self, event: Event) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Working(Event):
    """Long work began (``label`` says what) or, with ``label`` ``None``, ended: a caller on a
    terminal may show a status line meanwhile (the CLI's ``working``)."""

    name: ClassVar[str] = "working"
    label: str | None


@dataclass(frozen=True, slots=True)
class Recovered(Event):
    """Something an interrupted process left was settled before this work: a staged transfer,
    an orphan dataset folder (``storage.orphans``). Any use case may report one; callers print
    it as ``Recovered: what``."""

    name: ClassVar[str] = "recovered"
    what: str


def announcing(sink: EventSink) -> Callable[[str], AbstractAsyncContextManager[None]]:
    """An ``around`` for use cases that reports the work it wraps to ``sink`` as ``Working``
    events (for a caller that shows them elsewhere, such as a daemon's thin client)."""

    @asynccontextmanager
    async def around(label: str) -> AsyncIterator[None]:
        sink.emit(Working(label))
        try:
            yield
        finally:
            sink.emit(Working(None))

    return around


Confirm = Callable[[str], None]
"""Asked before a destructive step with the question; returns when the user agreed, raises
otherwise (the CLI asks on a terminal or takes ``-y``)."""


def event_from_json(data: Mapping[str, Any], kinds: Iterable[type[Event]]) -> Event:
    """The event ``to_json`` gave, one of ``kinds`` (``ValueError`` for anything else)."""
    by_name = {kind.name: kind for kind in kinds}
    kind = by_name.get(data.get("event"))  # type: ignore[arg-type]  # a missing name finds none
    if kind is None:
        raise ValueError(f"unknown event {data.get('event')!r}")
    fields = dataclasses.fields(kind)  # type: ignore[arg-type]  # events are dataclasses
    return kind(**{spec.name: data[spec.name] for spec in fields})
