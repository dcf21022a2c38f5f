"""Progress of a long verification: blocks and bytes checked, rate and ETA, on a terminal only.

Workers report from several threads, so updates take a lock; the line is redrawn at most
:data:`REDRAW_SECONDS` apart. Anything that is not a terminal (a log file, a pipe, the daemon)
gets :class:`NoProgress`, so non-interactive runs stay quiet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TextIO

REDRAW_SECONDS = 0.2


class Titled(Protocol):
    """What a progress line shows of a layer (``verifier.report.Layer``, or a layer's title a
    daemon sent: a pull's status line and a thin client need not load the report model)."""

    @property
    def title(self) -> str: ...


class Progress:
    """Receives progress events; this base class ignores them."""

    def begin(
        self, dataset: str, layer: Titled, *, blocks: int | None = None, bytes: int | None = None
    ) -> None:
        """A layer of ``dataset`` starts; totals are given when known."""

    def advance(self, *, blocks: int = 0, bytes: int = 0) -> None:
        """More blocks or bytes were checked (callable from any thread)."""

    def end(self) -> None:
        """The layer finished."""


class NoProgress(Progress):
    pass


class TerminalProgress(Progress):
    """One self-overwriting status line on ``stream`` (normally ``sys.stderr``)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()
        self._label = ""
        self._total_blocks: int | None = None
        self._total_bytes: int | None = None
        self._blocks = 0
        self._bytes = 0
        self._started = 0.0
        self._drawn_at = 0.0
        self._width = 0

    def begin(
        self, dataset: str, layer: Titled, *, blocks: int | None = None, bytes: int | None = None
    ) -> None:
        with self._lock:
            self._label = f"{dataset}: {layer.title}"
            self._total_blocks, self._total_bytes = blocks, bytes
            self._blocks = self._bytes = 0
            self._started = self._clock()
            self._draw(force=True)

    def advance(self, *, blocks: int = 0, bytes: int = 0) -> None:
        with self._lock:
            self._blocks += blocks
            self._bytes += bytes
            self._draw(force=False)

    def end(self) -> None:
        with self._lock:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
            self._width = 0

    def line(self) -> str:
        """The current status line (without redrawing)."""
        elapsed = max(self._clock() - self._started, 1e-9)
        parts = [self._label]
        parts.append(_of(self._blocks, self._total_blocks, "blocks", str))
        if self._total_bytes or self._bytes:
            parts.append(_of(self._bytes, self._total_bytes, "", format_bytes))
            parts.append(f"{format_bytes(self._bytes / elapsed)}/s")
        else:
            parts.append(f"{self._blocks / elapsed:.1f} blocks/s")
        eta = self._eta(elapsed)
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        return " · ".join(p for p in parts if p)

    def _eta(self, elapsed: float) -> float | None:
        if self._total_bytes and self._bytes:
            return elapsed * (self._total_bytes - self._bytes) / self._bytes
        if self._total_blocks and self._blocks:
            return elapsed * (self._total_blocks - self._blocks) / self._blocks
        return None

    def _draw(self, *, force: bool) -> None:
        now = self._clock()
        if not force and now - self._drawn_at < REDRAW_SECONDS:
            return
        self._drawn_at = now
        text = self.line()
        padding = " " * max(self._width - len(text), 0)
        self._stream.write("\r" + text + padding)
        self._stream.flush()
        self._width = len(text)


def progress_for(stream: TextIO) -> Progress:
    """Live progress if ``stream`` is a terminal, silence otherwise."""
    isatty = getattr(stream, "isatty", None)
    return TerminalProgress(stream) if isatty is not None and isatty() else NoProgress()


def _of(done: int, total: int | None, unit: str, fmt: Callable[[int], str]) -> str:
    text = fmt(done) if total is None else f"{fmt(done)}/{fmt(total)}"
    return f"{text} {unit}".strip()


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
