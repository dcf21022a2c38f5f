"""A function mapped over items in worker threads, its results handed on in the items' order.

A large answer's chunks are rendered this way: the render is mostly Arrow and numpy work that
releases the GIL, so two chunks rendered at once use two cores, while the caller places each
chunk's text in order (hashing it, sending it)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_END: Any = object()


def in_order(
    function: Callable[[T], R], items: Iterable[T], workers: Executor | None, ahead: int = 3
) -> Iterator[R]:
    """``function`` of each item, in order; with ``workers``, up to ``ahead`` items are worked
    on there at once (so at most ``ahead`` results wait: memory stays bounded). When ``items``
    fails, the results of the items before it come first, as they would one at a time; a
    generator closed early cancels the work not started."""
    source = iter(items)
    if workers is None:
        yield from map(function, source)
        return
    first = next(source, _END)
    if first is _END:
        return
    try:
        second = next(source, _END)
    except BaseException:
        yield function(first)
        raise
    if second is _END:  # one item (a small answer): no hand-off to a worker
        yield function(first)
        return
    waiting: deque[Future[R]] = deque(workers.submit(function, item) for item in (first, second))
    try:
        while True:
            try:
                item = next(source)
            except StopIteration:
                break
            except BaseException:
                while waiting:
                    yield waiting.popleft().result()
                raise
            waiting.append(workers.submit(function, item))
            if len(waiting) >= ahead:
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()
    finally:
        for future in waiting:
            future.cancel()
