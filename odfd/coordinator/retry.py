"""One automatic retry for a transaction that lost the race for a dataset's head.

Writers plan a transaction on the head they read and move head by compare-and-swap, so when two
write the same dataset at once one of them finds head moved (``RefCasError``) and nothing of it
was recorded. Its input is still there (a file, the stdin copy, a source fetched again, the
inputs of a transform), so running it once more, planned on the winner's head, is what the user
would do by hand; a second loss is reported as it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from storage.errors import RefCasError

T = TypeVar("T")


async def retry_lost_race(
    attempt: Callable[[], Awaitable[T]], on_retry: Callable[[RefCasError], None]
) -> T:
    """``attempt()``, and once more (after ``on_retry``) if it lost the race for the head."""
    try:
        return await attempt()
    except RefCasError as lost:
        on_retry(lost)
    return await attempt()
