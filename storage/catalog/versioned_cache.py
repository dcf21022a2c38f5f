"""Answers kept while the catalog (or what else they depend on) is unchanged.

Serving a request reads the same few things again and again: a token's grant, a dataset's row,
a query's plan, which datasets a query text reads. Each is kept by a *version* (:data:`Version`):
a value that differs whenever anything the answer depends on may have changed, e.g. the
catalog's ``PRAGMA data_version`` (any commit: a dataset's head, a token issued or revoked, a
resource), with the settings in force where answers depend on them too. A cache holds answers
of one version only: asked with another, it forgets everything it holds, so no answer outlives
the state it was computed from, and a revoked token or a dataset made private takes effect on
the next call. ``None`` (the version cannot be read now) caches nothing.

Used by the catalog reader's lookups (``reader``), the Flight SQL server's token subjects and
plans (``odfd.flight_sql``) and the query API's reads of query texts (``odfd.app.answers``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from storage.lru import Lru

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Version = Callable[[], Hashable | None]
"""The version now; ``None`` when it cannot be told (nothing is cached then)."""


def unversioned() -> None:
    """A :data:`Version` for a holder that caches nothing."""
    return None


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    value: V
    until: float | None


class VersionedCache(Generic[K, V]):
    """At most ``limit`` answers of one version (the least recently used goes first), each
    until its own deadline if it has one (on ``clock``, seconds); thread-safe."""

    def __init__(self, limit: int, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._version: Hashable | None = None
        self._entries: Lru[K, _Entry[V]] = Lru(limit)

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
                self._entries.pop(key)
                return None
            return entry.value

    def put(
        self, key: K, version: Hashable | None, value: V, *, until: float | None = None
    ) -> None:
        """Keeps ``value``, computed at ``version`` (read before computing it): dropped when the
        version has moved on since."""
        if version is None:
            return
        with self._lock:
            if version != self._version:
                return
            self._entries.put(key, _Entry(value, until))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
