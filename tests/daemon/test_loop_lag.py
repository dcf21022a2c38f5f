"""The loop-lag metric sees a stall of the event loop (what a served request would wait)."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, Histogram

from odfd.daemon.loop_lag import watch_loop_lag


def _count_over(histogram: Histogram, bound: float) -> float:
    samples = {
        float(s.labels["le"]): s.value
        for metric in histogram.collect()
        for s in metric.samples
        if s.name.endswith("_bucket")
    }
    return samples[float("inf")] - samples[bound]


async def test_a_blocked_loop_shows_as_lag() -> None:
    histogram = Histogram("lag_seconds", "lag", buckets=(0.05, 0.25), registry=CollectorRegistry())
    watcher = asyncio.create_task(watch_loop_lag(histogram, interval=0.02))
    try:
        await asyncio.sleep(0.1)
        before = _count_over(histogram, 0.25)
        time.sleep(0.4)  # noqa: ASYNC251 - the stall under test
        await asyncio.sleep(0.1)
        assert _count_over(histogram, 0.25) >= before + 1
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
