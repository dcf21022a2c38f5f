"""Catching work that blocks the event loop: asyncio's debug mode logs every callback or task
step that runs longer than ``slow_callback_duration``; ``LoopBlockingCheck`` collects those log
records for one loop, so a test can fail on them.

A step's wall time also counts the time its thread was ready to run but waited for a CPU (other
processes on a loaded 2-core machine): scheduling noise, not blocking. The kernel keeps that wait
per thread (``/proc/<tid>/schedstat``, "run delay"), so the check takes it off: what is left is
time the step spent running or sleeping in a call (a blocking read, ``time.sleep``, a lock),
which is what a served request would wait for on an idle machine."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

SLOW_CALLBACK_SECONDS = 0.1

_ORIGINAL_RUN = asyncio.Handle._run
_watched: dict[asyncio.AbstractEventLoop, _RunDelay] = {}
_watchers: dict[asyncio.AbstractEventLoop, int] = {}


class _RunDelay:
    """One thread's scheduler times (``/proc/<tid>/schedstat``: time on a CPU, and time runnable
    but waiting for one), and how much of each fell into the last handle its loop ran. Reads 0
    where the kernel keeps no schedstat."""

    def __init__(self, thread_id: int) -> None:
        try:
            self._fd: int | None = os.open(f"/proc/self/task/{thread_id}/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None
        self.last_handle = (0.0, 0.0)

    def seconds(self) -> tuple[float, float]:
        """(on a CPU, waiting for a CPU) so far."""
        if self._fd is None:
            return (0.0, 0.0)
        on_cpu, waiting, _ = os.pread(self._fd, 128, 0).split()
        return (int(on_cpu) / 1e9, int(waiting) / 1e9)

    def close(self) -> None:
        """Done watching (maybe from within a handle, which then reads 0 as it ends)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _run_measuring_run_delay(self: asyncio.Handle) -> None:
    """``Handle._run`` while a loop is watched: a watched loop's handles also note their thread's
    run delay (two ``pread``s of a procfs file: microseconds)."""
    delay = _watched.get(self._loop)  # type: ignore[attr-defined]
    if delay is None:
        _ORIGINAL_RUN(self)
        return
    before = delay.seconds()
    try:
        _ORIGINAL_RUN(self)
    finally:
        after = delay.seconds()
        delay.last_handle = (after[0] - before[0], after[1] - before[1])


def _watch(loop: asyncio.AbstractEventLoop) -> _RunDelay:
    if loop not in _watched:
        _watched[loop] = _RunDelay(threading.get_native_id())
        asyncio.Handle._run = _run_measuring_run_delay  # type: ignore[method-assign]
    _watchers[loop] = _watchers.get(loop, 0) + 1
    return _watched[loop]


def _unwatch(loop: asyncio.AbstractEventLoop) -> None:
    _watchers[loop] -= 1
    if _watchers[loop] == 0:
        del _watchers[loop]
        _watched.pop(loop).close()
        if not _watched:
            asyncio.Handle._run = _ORIGINAL_RUN  # type: ignore[method-assign]


class LoopBlockingCheck(logging.Handler):
    """While installed on a running loop (enter it on the loop's own thread): debug mode on, and
    asyncio's slow-callback warnings ("Executing <Handle ...> took 0.250 seconds") of steps that
    blocked the loop for ``SLOW_CALLBACK_SECONDS`` or more, once the wait for a CPU is taken
    off, kept in ``slow``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, except_task_of: str = "") -> None:
        """``except_task_of``: the qualified name of a coroutine function whose own steps are not counted (a test's
        body builds data and asserts on the loop; the check is about the code under test)."""
        super().__init__(logging.WARNING)
        self.loop = loop
        self._excepted = f"coro=<{except_task_of}()" if except_task_of else None
        self.slow: list[str] = []
        self._was_debug = loop.get_debug()
        self._was_duration = loop.slow_callback_duration
        self._thread = threading.get_ident()
        self._delay: _RunDelay | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self._thread or record.msg != "Executing %s took %.3f seconds":
            return
        assert isinstance(record.args, tuple)
        handle, took = record.args
        assert isinstance(took, float)
        on_cpu, waited = self._delay.last_handle if self._delay is not None else (0.0, 0.0)
        blocked = took - waited
        if blocked < SLOW_CALLBACK_SECONDS:
            return
        if self._excepted is None or self._excepted not in str(handle):
            self.slow.append(
                f"{record.getMessage()}: blocked {blocked:.3f} s ({on_cpu:.3f} s on a CPU; "
                f"{waited:.3f} s waiting for one, not counted)"
            )

    def __enter__(self) -> LoopBlockingCheck:
        self._delay = _watch(self.loop)
        self.loop.set_debug(True)
        self.loop.slow_callback_duration = SLOW_CALLBACK_SECONDS
        logging.getLogger("asyncio").addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("asyncio").removeHandler(self)
        self.loop.slow_callback_duration = self._was_duration
        self.loop.set_debug(self._was_debug)
        _unwatch(self.loop)

    def report(self) -> str:
        return (
            f"the event loop was blocked for more than {SLOW_CALLBACK_SECONDS * 1000:.0f} ms "
            f"{len(self.slow)} time(s):\n" + "\n".join(self.slow)
        )
