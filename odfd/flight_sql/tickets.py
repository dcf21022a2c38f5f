"""Plans kept between a statement's GetFlightInfo and its DoGet.

A client that asks for a FlightInfo fetches its ticket right after (the ADBC and JDBC drivers do
it in the same call): planning the query again for the DoGet would cost a second trip through
the catalog for the same answer. So the plan GetFlightInfo made is kept for its ticket, and the
DoGet runs it: the result is the datasets as they were when the FlightInfo was answered (the
plan holds their files). A ticket is taken once; one that is fetched again, fetched by another
subject, or was dropped (too many waiting, or not fetched in time) is planned anew, as any other
query, at the datasets' heads then.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from odfd.flight_sql.service import PlannedQuery, Subject
from storage.lru import Lru

KEPT_TICKETS = 256
"""Plans waiting for their DoGet, at most (the oldest goes first)."""
KEPT_SECONDS = 30.0
"""How long a plan waits for its DoGet."""


@dataclass(frozen=True, slots=True)
class _Kept:
    subject: Subject
    planned: PlannedQuery
    until: float


class PlannedTickets:
    """Ticket -> the plan GetFlightInfo made for it; thread-safe (calls run on gRPC's threads)."""

    def __init__(
        self,
        *,
        limit: int = KEPT_TICKETS,
        seconds: float = KEPT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: Lru[bytes, _Kept] = Lru(limit)

    def keep(self, ticket: bytes, subject: Subject, planned: PlannedQuery) -> None:
        now = self._clock()
        with self._lock:
            self._kept.put(ticket, _Kept(subject, planned, now + self._seconds))
            while (oldest := self._kept.oldest()) is not None and oldest.until < now:
                self._kept.pop_oldest()

    def take(self, ticket: bytes, subject: Subject) -> PlannedQuery | None:
        """The plan kept for ``ticket`` if ``subject`` made it and it is still waiting."""
        with self._lock:
            kept = self._kept.pop(ticket)
        if kept is None or kept.subject != subject or kept.until < self._clock():
            return None
        return kept.planned

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)
