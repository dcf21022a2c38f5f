"""A size-bounded least-recently-used map: the one the node's caches are built on.

The caches and bounded memories of the node (``storage.catalog.versioned_cache``, the query
API's views in ``odfd.app.answers``, the Flight SQL server's planned tickets, sessions, prepared
statements and cancelled tickets, the live query sessions of ``odfd.app.live_queries``) each add
their own rule of what may be kept and for how long; the bound and the order they forget in are
this.
Not thread-safe: a holder used from several threads locks around it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """At most ``limit`` values; putting one more forgets the least recently used (a ``get``
    or ``put`` makes a key the most recently used). Values are never ``None`` (``None`` is
    "not kept")."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, now the most recently used; ``None``: not kept."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The value kept for ``key`` without using it (its place in the order stays), for a
        holder whose order is not every read's (first put, last touched); ``None``: not kept."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        """Keeps ``value`` as the most recently used, forgetting the least recently used
        beyond the limit."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Forgets ``key``; its value, ``None`` if it was not kept."""
        return self._entries.pop(key, None)

    def oldest(self) -> V | None:
        """The least recently used value (next to be forgotten), without using it."""
        return next(iter(self._entries.values()), None)

    def pop_oldest(self) -> None:
        """Forgets the least recently used value (if any)."""
        if self._entries:
            self._entries.popitem(last=False)

    def values(self) -> list[V]:
        """The values kept, least recently used first (a copy: the holder may forget while
        going through them)."""
        return list(self._entries.values())

    def items(self) -> list[tuple[K, V]]:
        """The keys and values kept, least recently used first (a copy, as ``values``)."""
        return list(self._entries.items())

    def clear(self) -> None:
        self._entries.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
