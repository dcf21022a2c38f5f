"""Cancelling the Spark jobs of an asyncio task that gets cancelled.

Spark work runs in worker threads (``asyncio.to_thread``), which a cancelled task cannot stop: the
thread would keep its Spark job running to the end. So a task that starts Spark work opens
``cancellable_jobs()``; ``to_thread`` copies the task's context into the thread, where
``jobs_of_task(session)`` puts every job the thread starts into the task's job group (Spark
Classic: ``setJobGroup`` with interrupt-on-cancel; Spark Connect, which has no job groups: an
operation tag on the session). When the task is cancelled, ``cancellable_jobs`` cancels that group
before the cancellation goes on, and the thread's Spark call fails at once.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from verifier.engine import session as engine_session

if TYPE_CHECKING:  # Spark is imported when work starts, not with the modules that name it
    from pyspark.sql import SparkSession

_GROUP: ContextVar[str | None] = ContextVar("odfd_spark_job_group", default=None)
_connect_sessions: dict[str, list[SparkSession]] = {}
_lock = threading.Lock()


@asynccontextmanager
async def cancellable_jobs(what: str) -> AsyncIterator[str]:
    """Spark jobs started inside the block (from threads it starts) form one group, named after
    ``what``; cancelling the block cancels them. Yields the group's name."""
    group = f"odfd-{what}-{uuid.uuid4().hex[:12]}"
    token = _GROUP.set(group)
    try:
        yield group
    except asyncio.CancelledError:
        await asyncio.shield(asyncio.to_thread(cancel_group, group))
        raise
    finally:
        _GROUP.reset(token)


@contextmanager
def jobs_of_task(session: SparkSession) -> Iterator[None]:
    """In a worker thread: the jobs this thread starts on ``session`` join the group of the task
    that started the thread (no group outside ``cancellable_jobs``)."""
    group = _GROUP.get()
    if group is None:
        yield
        return
    if engine_session.is_connect(session):
        with _lock:
            _connect_sessions.setdefault(group, []).append(session)
        session.addTag(group)
        try:
            yield
        finally:
            session.removeTag(group)
            with _lock:
                _connect_sessions[group].remove(session)
        return
    context = session.sparkContext
    context.setJobGroup(group, f"odfd {group}", interruptOnCancel=True)
    try:
        yield
    finally:
        # PySpark has no clearJobGroup; the JVM side clears this thread's group (pool threads
        # are reused, and the next job must not join a finished task's group).
        context._jsc.clearJobGroup()


def cancel_group(group: str) -> None:
    """Cancels the running and waiting jobs of ``group`` (blocking: call from a thread)."""
    if not engine_session.is_running():
        return
    with _lock:
        connect = list(_connect_sessions.get(group, ()))
    for session in connect:
        session.interruptTag(group)
    spark = engine_session.get_spark()
    if not engine_session.is_connect(spark):
        spark.sparkContext.cancelJobGroup(group)
