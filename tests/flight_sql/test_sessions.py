"""The Flight SQL server's sessions: idle ones expire, their number and each one's prepared
statements are bounded, and which one goes first is fixed (least recently touched session,
first made statement)."""

from __future__ import annotations

import pytest

from odfd.flight_sql.auth import Sessions
from odfd.flight_sql.service import ANONYMOUS
from odfd.flight_sql.status import Unauthenticated


def test_idle_sessions_expire_and_the_least_recently_touched_goes_first() -> None:
    """A session gone (idle too long, or the least recently touched of too many) has lost its
    prepared statements; touching its token opens a new, empty one."""
    now = [0.0]
    sessions = Sessions(idle_timeout=10.0, max_sessions=2, clock=lambda: now[0])
    first = sessions.open_anonymous()
    kept = sessions.add_statement(first, "SELECT 1")
    now[0] = 1.0
    second = sessions.open_anonymous()
    lost = sessions.add_statement(second, "SELECT 2")
    now[0] = 2.0
    assert sessions.touch(first, ANONYMOUS) == ANONYMOUS  # ``second`` is the least recent now
    third = sessions.open_anonymous()
    expired = sessions.add_statement(third, "SELECT 3")
    now[0] = 5.0
    with pytest.raises(Unauthenticated):
        sessions.statement(second, lost)
    sessions.touch(first, ANONYMOUS)
    now[0] = 12.5  # ``third`` (made at 2.0) has been idle too long, ``first`` (5.0) not
    sessions.touch(first, ANONYMOUS)
    with pytest.raises(Unauthenticated):
        sessions.statement(third, expired)
    assert sessions.statement(first, kept).sql == "SELECT 1"
    assert sessions.touch(third, ANONYMOUS) == ANONYMOUS
    with pytest.raises(Unauthenticated, match="Invalid plan token"):
        sessions.statement(third, expired)


def test_a_sessions_first_made_statement_goes_first_even_when_read() -> None:
    sessions = Sessions(max_statements=2)
    token = sessions.open_anonymous()
    first = sessions.add_statement(token, "SELECT 1")
    second = sessions.add_statement(token, "SELECT 2")
    assert sessions.statement(token, first).sql == "SELECT 1"  # reading does not keep it longer
    sessions.add_statement(token, "SELECT 3")
    with pytest.raises(Unauthenticated, match="Invalid plan token"):
        sessions.statement(token, first)
    assert sessions.statement(token, second).sql == "SELECT 2"
    sessions.close(token)
    with pytest.raises(Unauthenticated):
        sessions.statement(token, second)
