"""Wall-clock helpers shared by the daemon's parts."""

from __future__ import annotations

import random
from datetime import timedelta


def jittered(seconds: float, jitter: float) -> timedelta:
    """``seconds`` stretched or shrunk by a random fraction of at most ``jitter``."""
    return timedelta(seconds=seconds * (1 + random.uniform(-jitter, jitter)))


def backoff_delay(failures: int, initial: float, maximum: float) -> float:
    """Seconds before retrying after ``failures`` consecutive failures: doubling, capped."""
    return min(initial * 2 ** max(failures - 1, 0), maximum)
