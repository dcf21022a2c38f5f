"""Spark jobs join the cancellation scope of the task whose worker thread starts them.

Inside ``verifier.engine.cancel.cancellable_jobs`` the jobs a thread starts on a session belong to
the scope: Spark Classic puts them in a job group named after it (``setJobGroup`` with
interrupt-on-cancel); Spark Connect, which has no job groups, tags the session's operations with
it. Cancelling the scope cancels the group, or interrupts the tag.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from verifier.engine.cancel import current_scope
from verifier.engine.spark import internals

if TYPE_CHECKING:  # Spark is imported when work starts, not with the modules that name it
    from pyspark.sql import SparkSession


@contextmanager
def jobs_of_task(session: SparkSession) -> Iterator[None]:
    """In a worker thread: the jobs this thread starts on ``session`` join the scope of the task
    that started the thread (no group outside ``cancellable_jobs``)."""
    scope = current_scope()
    if scope is None:
        yield
        return
    group = scope.name
    if internals.is_connect(session):
        session.addTag(group)

        def interrupt() -> None:
            session.interruptTag(group)

        forget = scope.on_cancel(interrupt)
        try:
            yield
        finally:
            forget()
            session.removeTag(group)
        return
    context = session.sparkContext
    context.setJobGroup(group, f"odfd {group}", interruptOnCancel=True)
    forget = scope.on_cancel(lambda: context.cancelJobGroup(group))
    try:
        yield
    finally:
        forget()
        internals.clear_job_group(context)
