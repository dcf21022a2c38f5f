"""The loop-blocking check of the daemon tests catches a blocking call or a long computation, and
ignores a step that waits (off the loop, or for a CPU another process holds)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.daemon.loop_check import SLOW_CALLBACK_SECONDS, LoopBlockingCheck


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


def _cpu_seconds_of(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def test_waiting_for_a_cpu_is_not_blocking() -> None:
    """A short step on a CPU the loop's thread shares with a busy process (at a lower priority,
    so the wait is long and sure) takes far longer than the limit in wall time, and is not
    reported; a blocking call made under the same contention still is."""
    cpu = min(os.sched_getaffinity(0))
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    outcome: dict[str, object] = {}

    def contended_loop() -> None:  # its own thread: its affinity and niceness end with it
        os.sched_setaffinity(0, {cpu})
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        loop = asyncio.new_event_loop()
        try:
            with LoopBlockingCheck(loop) as check:

                async def computes_briefly() -> float:
                    started = time.monotonic()
                    _spin(0.005)
                    return time.monotonic() - started

                outcome["wall"] = loop.run_until_complete(computes_briefly())
                outcome["after_brief"] = list(check.slow)

                async def blocks() -> None:
                    time.sleep(0.3)  # noqa: ASYNC251 (blocks the loop on purpose: what must be caught)

                loop.run_until_complete(blocks())
            outcome["after_blocking"] = check.slow
        finally:
            loop.close()

    try:
        os.sched_setaffinity(burner.pid, {cpu})
        while _cpu_seconds_of(burner.pid) < 0.05:  # the burner is running
            time.sleep(0.01)
        thread = threading.Thread(target=contended_loop)
        thread.start()
        thread.join()
    finally:
        burner.kill()
        burner.wait()
    assert isinstance(outcome["wall"], float) and outcome["wall"] > 2 * SLOW_CALLBACK_SECONDS
    assert outcome["after_brief"] == []
    blocked = outcome["after_blocking"]
    assert isinstance(blocked, list) and len(blocked) == 1 and "blocks()" in blocked[0], blocked
