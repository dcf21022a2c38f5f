"""Engine work that stops with the task running it: a forwarded command the client cancels
(Ctrl-C, or its connection lost), a derivative update or an audit the daemon stops.

A use case's engine work runs in worker threads, which cancelling its asyncio task cannot stop;
inside ``cancellable_engine_work`` the engine ties the jobs those threads start to the task, and
cancelling the task cancels them first (``verifier.engine.cancel``). Which tasks may be cancelled
is the interface's to say; how their engine work stops is the node's.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from verifier.engine.cancel import cancellable_jobs


def cancellable_engine_work(what: str) -> AbstractAsyncContextManager[str]:
    """A block whose engine jobs are cancelled with the task running it, grouped under a unique
    name made from ``what`` (which it yields: engines name their job groups after it)."""
    return cancellable_jobs(what)
