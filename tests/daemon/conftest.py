"""Every async daemon test runs with asyncio's debug mode and fails if a callback blocked the
event loop for more than 100 ms (see ``loop_check``; time its thread waited for a CPU, on a
loaded machine, is not blocking). The test's own steps (building data, asserting) are not
counted: the check is about the daemon. Synchronous tests drive daemons in other processes or in
``asyncio.run``, outside this check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.daemon.loop_check import LoopBlockingCheck


@pytest.fixture(autouse=True)
async def event_loop_never_blocks(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    if not asyncio.iscoroutinefunction(request.function):
        yield
        return
    loop = asyncio.get_running_loop()
    with LoopBlockingCheck(loop, except_task_of=request.function.__qualname__) as check:
        yield
    if check.slow:
        pytest.fail(check.report(), pytrace=False)
