"""The plans kept between GetFlightInfo and DoGet: taken once, by their subject, in time."""

from __future__ import annotations

import pyarrow as pa

from odfd.app.authorization import ANONYMOUS, Principal
from odfd.flight_sql.service import PlannedQuery
from odfd.flight_sql.tickets import PlannedTickets
from tests.fixtures.clock import ManualClock

PLANNED = PlannedQuery("select 1", pa.schema([("one", pa.int64())]))
ALICE = Principal("alice")


def test_a_ticket_is_taken_once_by_its_subject() -> None:
    tickets = PlannedTickets()
    tickets.keep(b"t1", ANONYMOUS, PLANNED)
    tickets.keep(b"t2", ALICE, PLANNED)
    assert tickets.take(b"t1", ANONYMOUS) is PLANNED
    assert tickets.take(b"t1", ANONYMOUS) is None  # fetched again: planned anew
    assert tickets.take(b"t2", ANONYMOUS) is None  # not alice's plan for someone else
    assert tickets.take(b"t2", ALICE) is None  # and it is gone
    assert tickets.take(b"unknown", ANONYMOUS) is None


def test_plans_not_fetched_in_time_or_beyond_the_limit_are_dropped() -> None:
    clock = ManualClock()
    tickets = PlannedTickets(limit=2, seconds=10.0, clock=clock)
    tickets.keep(b"old", ANONYMOUS, PLANNED)
    clock.now = 11.0
    assert tickets.take(b"old", ANONYMOUS) is None
    for name in (b"a", b"b", b"c"):
        tickets.keep(name, ANONYMOUS, PLANNED)
    assert len(tickets) == 2
    assert tickets.take(b"a", ANONYMOUS) is None
    assert tickets.take(b"c", ANONYMOUS) is PLANNED
    clock.now = 30.0
    tickets.keep(b"d", ANONYMOUS, PLANNED)  # keeping drops what waited too long
    assert len(tickets) == 1
