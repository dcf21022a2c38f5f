"""Catching work that blocks the event loop: asyncio's debug mode logs every callback or task
step that runs longer than ``slow_callback_duration``; ``LoopBlockingCheck`` collects those log
records for one loop, so a test can fail on them."""

from __future__ import annotations

import asyncio
import logging

SLOW_CALLBACK_SECONDS = 0.1


class LoopBlockingCheck(logging.Handler):
    """While installed on a running loop: debug mode on, and asyncio's slow-callback warnings
    ("Executing <Handle ...> took 0.250 seconds") kept in ``slow``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, except_task_of: str = "") -> None:
        """``except_task_of``: the qualified name of a coroutine function whose own steps are not counted (a test's
        body builds data and asserts on the loop; the check is about the code under test)."""
        super().__init__(logging.WARNING)
        self.loop = loop
        self._excepted = f"coro=<{except_task_of}()" if except_task_of else None
        self.slow: list[str] = []
        self._was_debug = loop.get_debug()
        self._was_duration = loop.slow_callback_duration

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing ") and " took " in message:
            if self._excepted is None or self._excepted not in message:
                self.slow.append(message)

    def __enter__(self) -> LoopBlockingCheck:
        self.loop.set_debug(True)
        self.loop.slow_callback_duration = SLOW_CALLBACK_SECONDS
        logging.getLogger("asyncio").addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("asyncio").removeHandler(self)
        self.loop.slow_callback_duration = self._was_duration
        self.loop.set_debug(self._was_debug)

    def report(self) -> str:
        return (
            f"the event loop was blocked for more than {SLOW_CALLBACK_SECONDS * 1000:.0f} ms "
            f"{len(self.slow)} time(s):\n" + "\n".join(self.slow)
        )
