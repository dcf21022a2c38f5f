"""Ordered lanes over a thread pool: order within a lane, bounded backlog, errors handed back."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest

from protocol.hashing.lanes import Lanes


def test_each_lane_runs_its_tasks_in_order_while_lanes_run_side_by_side() -> None:
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    running = {"now": 0, "most": 0}
    lock = threading.Lock()

    def task(lane: int, step: int) -> None:
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        time.sleep(0.002)
        seen[lane].append(step)
        with lock:
            running["now"] -= 1

    with ThreadPoolExecutor(max_workers=3) as pool:
        lanes = Lanes(pool, 3, max_pending=6)
        for step in range(20):
            for lane in range(3):
                lanes.submit(lane, partial(task, lane, step))
        lanes.wait()
    assert all(steps == list(range(20)) for steps in seen.values())
    assert running["most"] > 1


def test_submit_waits_while_max_pending_tasks_are_unfinished() -> None:
    release = threading.Event()

    def hold() -> None:
        release.wait()

    with ThreadPoolExecutor(max_workers=2) as pool:
        lanes = Lanes(pool, 2, max_pending=2)
        lanes.submit(0, hold)
        lanes.submit(1, hold)
        third = threading.Thread(target=lanes.submit, args=(0, lambda: None))
        third.start()
        third.join(0.2)
        assert third.is_alive()  # held back: two tasks are still running
        release.set()
        third.join(5)
        assert not third.is_alive()
        lanes.wait()


def test_the_first_error_is_raised_by_wait_and_later_tasks_are_skipped() -> None:
    ran: list[int] = []

    def fail() -> None:
        raise ValueError("bad block")

    with ThreadPoolExecutor(max_workers=1) as pool:
        lanes = Lanes(pool, 1, max_pending=10)
        lanes.submit(0, lambda: ran.append(1))
        lanes.submit(0, fail)
        lanes.submit(0, lambda: ran.append(3))
        with pytest.raises(ValueError, match="bad block"):
            lanes.wait()
    assert ran == [1]


def test_a_shut_down_pool_fails_wait_instead_of_hanging() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    pool.shutdown()
    lanes = Lanes(pool, 1, max_pending=2)
    lanes.submit(0, lambda: None)
    with pytest.raises(RuntimeError):
        lanes.wait()


def test_preparations_run_side_by_side_and_their_results_are_used_in_lane_order() -> None:
    """A later block's preparation may finish first (the first one here waits for the second
    to start); the lane still uses the results in the order they were submitted."""
    second_started = threading.Event()
    used: list[int] = []

    def prepare(step: int) -> int:
        if step == 0:
            assert second_started.wait(5), "the second preparation did not run beside the first"
        if step == 1:
            second_started.set()
        return step

    with ThreadPoolExecutor(max_workers=3) as pool:
        lanes = Lanes(pool, 1, max_pending=4)
        for step in range(4):
            lanes.submit_prepared(0, partial(prepare, step), used.append)
        lanes.wait()
    assert used == [0, 1, 2, 3]


def test_a_failed_preparation_is_its_tasks_error_and_later_tasks_are_skipped() -> None:
    used: list[int] = []

    def prepare(step: int) -> int:
        if step == 1:
            raise ValueError("cannot encode block 1")
        return step

    with ThreadPoolExecutor(max_workers=2) as pool:
        lanes = Lanes(pool, 1, max_pending=10)
        for step in range(3):
            lanes.submit_prepared(0, partial(prepare, step), used.append)
        with pytest.raises(ValueError, match="block 1"):
            lanes.wait()
    assert used == [0]


def test_a_shut_down_pool_fails_a_prepared_task_instead_of_hanging() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    pool.shutdown()
    lanes = Lanes(pool, 1, max_pending=2)
    lanes.submit_prepared(0, lambda: 1, lambda _: None)
    with pytest.raises(RuntimeError):
        lanes.wait()
