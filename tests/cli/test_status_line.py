"""The status line of long engine work: drawn in place on a terminal, cleared at the end, absent
on a pipe or with ``--quiet``."""

from __future__ import annotations

import asyncio
import io

import pytest

from odfd.cli import status_line
from odfd.cli import terminal as term


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def _work(stream: io.StringIO, seconds: float) -> None:
    async with status_line.working("ingest a.b: data.csv", stream):
        await asyncio.sleep(seconds)  # the engine's threads leave the loop free like this


def test_a_terminal_sees_a_redrawn_line_that_is_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status_line, "REDRAW_SECONDS", 0.05)
    monkeypatch.setattr(term._settings, "level", term.NORMAL)
    terminal = Terminal()
    asyncio.run(_work(terminal, 0.3))
    frames = terminal.getvalue().split("\r")
    drawn = [f for f in frames if f.strip()]
    assert len(drawn) >= 3
    assert all(" ingest a.b: data.csv · 0s" in f for f in drawn)
    assert {f[0] for f in drawn} <= set("|/-\\") and len({f[0] for f in drawn}) > 1
    assert frames[-1] == "" and frames[-2].strip() == ""  # the line is blanked, cursor at its start


def test_an_error_in_the_work_still_clears_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(term._settings, "level", term.NORMAL)
    terminal = Terminal()

    async def failing() -> None:
        async with status_line.working("pull x", terminal):
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(failing())
    assert terminal.getvalue().endswith("\r")
    assert terminal.getvalue().split("\r")[-2].strip() == ""


def test_nothing_on_a_pipe_or_with_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(term._settings, "level", term.NORMAL)
    pipe = io.StringIO()
    asyncio.run(_work(pipe, 0.05))
    assert pipe.getvalue() == ""
    monkeypatch.setattr(term._settings, "level", term.QUIET)
    terminal = Terminal()
    asyncio.run(_work(terminal, 0.05))
    assert terminal.getvalue() == ""


def test_a_thin_client_draws_the_line_of_the_work_its_daemon_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``odfd.cli.forwarded_rendering.StatusLineRendering`` (ingest's and pull's): the daemon's
    ``working`` events start and stop the same line a local run draws."""
    import time

    from odfd.app.events import Working
    from odfd.app.ingest import EVENTS
    from odfd.cli.commands.ingest import Printer
    from odfd.cli.forwarded_rendering import StatusLineRendering

    monkeypatch.setattr(status_line, "REDRAW_SECONDS", 0.05)
    monkeypatch.setattr(term._settings, "level", term.NORMAL)
    terminal = Terminal()
    rendering = StatusLineRendering(EVENTS, Printer())
    rendering.line = status_line.StatusLine(terminal)
    rendering.event(Working("ingest a.b: data.csv").to_json())
    time.sleep(0.3)
    rendering.event(Working(None).to_json())
    frames = terminal.getvalue().split("\r")
    drawn = [f for f in frames if f.strip()]
    assert len(drawn) >= 3 and all(" ingest a.b: data.csv · 0s" in f for f in drawn)
    assert frames[-1] == "" and frames[-2].strip() == ""
    pipe = status_line.StatusLine(io.StringIO())
    pipe.start("pull x")
    pipe.stop()
