"""The daemon's job runner: timers, bounded concurrency, no duplicates, graceful close."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from datetime import UTC, datetime, timedelta

from odfd.daemon.jobs import JobRunner
from odfd.daemon.time import backoff_delay


async def test_bounded_concurrency_and_deduplication() -> None:
    running, peak = 0, 0
    runs: list[int] = []
    release = asyncio.Event()

    async def job(key: Hashable) -> None:
        assert isinstance(key, int)  # the keys run below
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        runs.append(key)
        await release.wait()
        running -= 1

    runner = JobRunner("test", job, limit=3)
    runner.start()
    for key in range(10):
        runner.run_now(key)
        runner.run_now(key)  # already queued: not queued twice
    await asyncio.sleep(0.05)
    assert (runner.running, runner.queued, peak) == (3, 7, 3)
    release.set()
    for _ in range(100):
        if runner.running == runner.queued == 0:
            break
        await asyncio.sleep(0.01)
    assert sorted(runs) == list(range(10)) and peak == 3
    await runner.close(0)


async def test_timers_fire_in_order_and_can_be_replaced() -> None:
    seen: list[Hashable] = []

    async def job(key: Hashable) -> None:
        seen.append(key)

    runner = JobRunner("test", job, limit=1)
    runner.start()
    now = datetime.now(UTC)
    runner.schedule_at("late", now + timedelta(seconds=0.15))
    runner.schedule_at("early", now + timedelta(seconds=0.05))
    runner.schedule_at("never", now + timedelta(seconds=0.1))
    runner.cancel("never")
    runner.schedule_at("moved", now + timedelta(hours=1))
    runner.schedule_at("moved", now + timedelta(seconds=0.1))
    assert set(runner.scheduled()) == {"late", "early", "moved"}
    await asyncio.sleep(0.4)
    assert seen == ["early", "moved", "late"] and runner.timers == 0
    await runner.close(0)


async def test_close_waits_for_the_grace_period_then_cancels() -> None:
    finished, cancelled = [], []

    async def job(key: Hashable) -> None:
        try:
            await asyncio.sleep(0.05 if key == "quick" else 10)
            finished.append(key)
        except asyncio.CancelledError:
            cancelled.append(key)
            raise

    runner = JobRunner("test", job, limit=2)
    runner.start()
    runner.run_now("quick")
    runner.run_now("slow")
    runner.schedule_at("later", datetime.now(UTC) + timedelta(seconds=0.05))
    await asyncio.sleep(0.01)
    gone = await runner.close(0.3)
    assert finished == ["quick"] and cancelled == ["slow"] and gone == ["slow"]
    await asyncio.sleep(0.1)
    assert "later" not in finished  # no timer fires after close


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_delay(n, 30, 300) for n in (1, 2, 3, 4, 5, 9)] == [30, 60, 120, 240, 300, 300]
