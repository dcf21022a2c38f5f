"""How late the daemon's event loop runs: a timer set ``interval`` ahead that fires ``d``
seconds late means every callback ready meanwhile (a request being served) waited up to ``d``.
Observed into ``odfd_event_loop_lag_seconds``, so stalls under load show on ``/metrics``."""

from __future__ import annotations

import asyncio

from prometheus_client import Histogram

INTERVAL = 0.25
"""Four samples a second: enough for a p99 over a minute, nothing to see in idle CPU."""


async def watch_loop_lag(histogram: Histogram, interval: float = INTERVAL) -> None:
    """Runs until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        planned = loop.time() + interval
        await asyncio.sleep(interval)
        histogram.observe(max(loop.time() - planned, 0.0))
