"""Answers the server keeps while the node is unchanged: plans and token subjects.

A small query costs the server four calls (the ADBC driver prepares every statement, asks for
its FlightInfo, fetches it and closes it), and each used to resolve the caller's token and plan
the SQL again on the node's event loop: a trip through the loop and the catalog per call, more
CPU than the query itself. These caches answer from the gRPC thread instead.

They are kept by a *version* of the node (:data:`Version`): a value that differs whenever
anything an answer depends on may have changed (any commit to the catalog: a dataset's head, a
token issued or revoked, a ``Relations`` resource; or the server's settings, reloaded). The cache
holds answers of one version only: asked with another, it forgets everything it holds, so no
answer outlives the state it was computed from, and a revoked token or a dataset made private
takes effect on the next call. ``None`` (the version cannot be read now) caches nothing.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Version = Callable[[], Hashable | None]
"""The node's version now; ``None`` when it cannot be told (nothing is cached then)."""


def unversioned() -> None:
    """A :data:`Version` for a server that caches nothing."""
    return None


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    value: V
    until: float | None


class VersionedCache(Generic[K, V]):
    """At most ``limit`` answers of one version (the least recently used goes first), each
    until its own deadline if it has one (on ``clock``, seconds); thread-safe."""

    def __init__(self, limit: int, *, clock: Callable[[], float] = time.time) -> None:
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._version: Hashable | None = None
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()

    def get(self, key: K, version: Hashable | None) -> V | None:
        """The answer kept for ``key`` at ``version``; ``None``: compute it."""
        if version is None:
            return None
        with self._lock:
            if version != self._version:
                self._entries.clear()
                self._version = version
                return None
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.until is not None and self._clock() >= entry.until:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry.value

    def put(
        self, key: K, version: Hashable | None, value: V, *, until: float | None = None
    ) -> None:
        """Keeps ``value``, computed at ``version`` (read before computing it): dropped when the
        node has moved on since."""
        if version is None:
            return
        with self._lock:
            if version != self._version:
                return
            self._entries[key] = _Entry(value, until)
            self._entries.move_to_end(key)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
