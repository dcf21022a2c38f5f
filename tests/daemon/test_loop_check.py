"""The loop-blocking check of the daemon tests catches a blocking call or a long computation, and
ignores a step that waits off the loop."""

from __future__ import annotations

import asyncio
import time

from tests.daemon.loop_check import LoopBlockingCheck


def test_a_callback_that_blocks_the_loop_is_reported() -> None:
    loop = asyncio.new_event_loop()
    try:
        with LoopBlockingCheck(loop) as check:
            loop.run_until_complete(asyncio.to_thread(time.sleep, 0.3))  # off the loop: fine
            assert check.slow == []

            async def blocks() -> None:
                time.sleep(0.3)  # noqa: ASYNC251 (blocks the loop on purpose: what must be caught)

            loop.run_until_complete(blocks())
        assert len(check.slow) == 1 and "took 0.3" in check.slow[0], check.slow
        assert "blocks()" in check.slow[0]
        assert not loop.get_debug()  # restored
        with LoopBlockingCheck(loop, except_task_of=blocks.__qualname__) as check:
            loop.run_until_complete(blocks())
        assert check.slow == []
    finally:
        loop.close()


async def test_this_suite_runs_async_tests_under_the_check() -> None:
    loop = asyncio.get_running_loop()
    assert loop.get_debug() and loop.slow_callback_duration == 0.1


def _spin(cpu_seconds: float) -> None:
    """Run on a CPU (not sleep) until this thread has used ``cpu_seconds`` of it."""
    start = time.thread_time()
    while time.thread_time() - start < cpu_seconds:
        pass


def test_a_step_that_computes_for_long_is_reported() -> None:
    loop = asyncio.new_event_loop()
    try:
        with LoopBlockingCheck(loop) as check:

            async def computes() -> None:
                _spin(0.2)

            loop.run_until_complete(computes())
        assert len(check.slow) == 1 and "computes()" in check.slow[0], check.slow
    finally:
        loop.close()
