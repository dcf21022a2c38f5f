"""A one-line progress display (blocks, objects, bytes, rate) for pulls and pushes on a terminal.

Only drawn when the stream is a TTY, at most ten times a second; otherwise it only counts, so
logs and tests see no control characters.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class Progress:
    def __init__(
        self, label: str, stream: TextIO | None = None, *, enabled: bool | None = None
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.blocks = 0
        self.objects = 0
        self.objects_total: int | None = None
        self.bytes = 0
        self.phase = "metadata"
        self._started = time.monotonic()
        self._drawn = 0.0

    def add_blocks(self, n: int) -> None:
        self.blocks += n
        self._draw()

    def add_bytes(self, n: int) -> None:
        self.bytes += n
        self._draw()

    def object_done(self, *_: object) -> None:
        self.objects += 1
        self._draw()

    def set_phase(self, phase: str, objects_total: int | None = None) -> None:
        self.phase = phase
        if objects_total is not None:
            self.objects_total = objects_total
        self._draw(force=True)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        objects = f"{self.objects}" + (
            f"/{self.objects_total}" if self.objects_total is not None else ""
        )
        return (
            f"{self.label}: {self.phase}: {self.blocks} blocks, {objects} objects, "
            f"{_size(self.bytes)} at {_size(self.bytes / elapsed)}/s"
        )

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < 0.1:
            return
        self._drawn = now
        self.stream.write("\r\x1b[K" + self.line())
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
