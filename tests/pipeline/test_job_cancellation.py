"""A cancelled task cancels its Spark jobs: the worker thread's job does not run on to the end."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from pyspark.sql import SparkSession

from verifier.engine.cancel import cancellable_jobs
from verifier.engine.spark import session as engine_session
from verifier.engine.spark.cancel import jobs_of_task
from verifier.engine.spark.failures import spark_error_types
from verifier.engine.spark.session import isolated_session


def _active_jobs(group: str | None = None) -> set[int]:
    # The engine's current session: the one the worker thread's isolated session shares.
    tracker = engine_session.get_spark().sparkContext.statusTracker()
    active = set(tracker.getActiveJobsIds())
    return active if group is None else active & set(tracker.getJobIdsForGroup(group))


async def test_cancelling_the_task_cancels_its_spark_job(spark: SparkSession) -> None:
    started = threading.Event()
    outcome: list[BaseException | None] = []

    def endless_job() -> None:
        session = isolated_session()
        with jobs_of_task(session):
            started.set()
            try:
                # Hours of work on two cores: it ends only if it is cancelled.
                session.range(0, 10**13, numPartitions=2).selectExpr("sum(id % 7)").collect()
                outcome.append(None)
            except spark_error_types() as err:
                outcome.append(err)

    groups: list[str] = []

    async def audit_like_task() -> None:
        async with cancellable_jobs("test") as group:
            groups.append(group)
            await asyncio.to_thread(endless_job)

    task = asyncio.create_task(audit_like_task())
    assert await asyncio.to_thread(started.wait, 120)
    # Wait for this task's own job: jobs of earlier tests may still be winding down.
    deadline = time.monotonic() + 120
    while not _active_jobs(groups[0]):
        if task.done():  # the job failed before it could be cancelled: say why
            task.result()
        assert time.monotonic() < deadline, "the Spark job never started"
        await asyncio.sleep(0.2)
    group_jobs = _active_jobs(groups[0])

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    deadline = time.monotonic() + 60
    while not outcome:
        assert time.monotonic() < deadline, "the Spark job ran on after its task was cancelled"
        await asyncio.sleep(0.2)
    assert outcome[0] is not None and "cancel" in str(outcome[0]).lower()
    assert not group_jobs & _active_jobs()


async def test_jobs_outside_a_cancellable_block_join_no_group(spark: SparkSession) -> None:
    def job_group() -> str | None:
        session = isolated_session()
        with jobs_of_task(session):
            return session.sparkContext.getLocalProperty("spark.jobGroup.id")

    assert await asyncio.to_thread(job_group) is None
    async with cancellable_jobs("named") as group:
        assert await asyncio.to_thread(job_group) == group
    assert group.startswith("odfd-named-")
