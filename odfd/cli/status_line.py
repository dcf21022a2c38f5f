"""A status line on stderr while long engine work runs (``ingest``, ``pull``): what is being done
and for how long, redrawn in place and cleared when the work ends.

Shown by the rule ``verify``'s progress follows (``odfd.app.progress_display.progress_for``):
only when stderr is a terminal, and never with ``--quiet``; logs and pipes get nothing. The engine
work runs on worker threads, so the event loop is free to redraw.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import TextIO

from odfd.app.progress_display import NoProgress, format_duration, progress_for
from odfd.cli import terminal

REDRAW_SECONDS = 0.5
_SPINNER = "|/-\\"


@contextlib.asynccontextmanager
async def working(label: str, stream: TextIO | None = None) -> AsyncIterator[None]:
    """While the body runs, ``label · 12s`` on ``stream`` (stderr by default) if it is a terminal."""
    import asyncio  # here, not above: a thin client of the daemon draws with ``StatusLine``

    out = sys.stderr if stream is None else stream
    if not _shown(out):
        yield
        return
    line = _Line(out, label)

    async def redraw() -> None:
        for tick in range(sys.maxsize):
            line.draw(tick)
            await asyncio.sleep(REDRAW_SECONDS)

    task = asyncio.create_task(redraw())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        line.clear()


class StatusLine:
    """``working``'s line for a caller without an event loop: drawn by a thread between
    ``start`` and ``stop`` (a thin client showing the work its daemon reports)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = sys.stderr if stream is None else stream
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, label: str) -> None:
        self.stop()
        if not _shown(self._out):
            return
        line, stop = _Line(self._out, label), threading.Event()

        def redraw() -> None:
            tick = 0
            while not stop.is_set():
                line.draw(tick)
                tick += 1
                stop.wait(REDRAW_SECONDS)
            line.clear()

        self._stop = stop
        self._thread = threading.Thread(target=redraw, name="odfd-status-line", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Clears the line (if one is drawn); returns once it is gone."""
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join()
        self._stop = self._thread = None


def _shown(out: TextIO) -> bool:
    return not terminal.is_quiet() and not isinstance(progress_for(out), NoProgress)


class _Line:
    """One status line: ``label · elapsed`` behind a spinner, redrawn in place."""

    def __init__(self, out: TextIO, label: str) -> None:
        self.out, self.label = out, label
        self.started = time.monotonic()
        self.width = 0

    def draw(self, tick: int) -> None:
        elapsed = format_duration(time.monotonic() - self.started)
        text = f"{_SPINNER[tick % len(_SPINNER)]} {self.label} · {elapsed}"
        self.out.write("\r" + text + " " * max(self.width - len(text), 0))
        self.out.flush()
        self.width = len(text)

    def clear(self) -> None:
        self.out.write("\r" + " " * self.width + "\r")
        self.out.flush()
