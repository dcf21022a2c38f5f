"""The Flight SQL server's sessions: idle ones expire, their number and each one's prepared
statements are bounded, and which one goes first is fixed (least recently touched session,
first made statement)."""

from __future__ import annotations

import pytest

from odfd.flight_sql.auth import Sessions
from odfd.flight_sql.service import ANONYMOUS
from odfd.flight_sql.status import NotFound


def test_idle_sessions_expire_and_the_least_recently_touched_goes_first() -> None:
    now = [0.0]
    sessions = Sessions(idle_timeout=10.0, max_sessions=2, clock=lambda: now[0])
    first = sessions.open_anonymous()
    now[0] = 1.0
    second = sessions.open_anonymous()
    now[0] = 2.0
    assert sessions.touch(first) == ANONYMOUS  # ``second`` is now the least recently touched
    third = sessions.open_anonymous()
    now[0] = 5.0
    assert sessions.touch(second) is None
    assert sessions.touch(first) == ANONYMOUS
    now[0] = 12.5  # ``third`` (made at 2.0) has been idle too long, ``first`` (5.0) not
    assert sessions.touch(third) is None
    assert sessions.touch(first) == ANONYMOUS


def test_a_sessions_first_made_statement_goes_first_even_when_read() -> None:
    sessions = Sessions(max_statements=2)
    token = sessions.open_anonymous()
    first = sessions.add_statement(token, "SELECT 1")
    second = sessions.add_statement(token, "SELECT 2")
    assert sessions.statement(token, first).sql == "SELECT 1"  # reading does not keep it longer
    sessions.add_statement(token, "SELECT 3")
    with pytest.raises(NotFound):
        sessions.statement(token, first)
    assert sessions.statement(token, second).sql == "SELECT 2"
    sessions.close(token)
    assert sessions.touch(token) is None
