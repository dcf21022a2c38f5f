"""A status line on stderr while long engine work runs (``ingest``, ``pull``): what is being done
and for how long, redrawn in place and cleared when the work ends.

Shown by the rule ``verify``'s progress follows (``verifier.progress.progress_for``): only when
stderr is a terminal, and never with ``--quiet``; logs and pipes get nothing. The engine work runs
on worker threads, so the event loop is free to redraw.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import TextIO

from odfd.cli import terminal
from verifier.progress import NoProgress, format_duration, progress_for

REDRAW_SECONDS = 0.5
_SPINNER = "|/-\\"


@contextlib.asynccontextmanager
async def working(label: str, stream: TextIO | None = None) -> AsyncIterator[None]:
    """While the body runs, ``label · 12s`` on ``stream`` (stderr by default) if it is a terminal."""
    out = sys.stderr if stream is None else stream
    if terminal.is_quiet() or isinstance(progress_for(out), NoProgress):
        yield
        return
    width = 0

    async def redraw() -> None:
        nonlocal width
        started = time.monotonic()
        for tick in range(sys.maxsize):
            elapsed = format_duration(time.monotonic() - started)
            text = f"{_SPINNER[tick % len(_SPINNER)]} {label} · {elapsed}"
            out.write("\r" + text + " " * max(width - len(text), 0))
            out.flush()
            width = len(text)
            await asyncio.sleep(REDRAW_SECONDS)

    task = asyncio.create_task(redraw())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        out.write("\r" + " " * width + "\r")
        out.flush()
