"""A versioned cache keeps answers of one version only, each until its deadline."""

from __future__ import annotations

from storage.catalog.versioned_cache import VersionedCache
from tests.fixtures.clock import ManualClock


def test_an_answer_is_kept_while_the_version_is_the_same() -> None:
    cache: VersionedCache[str, int] = VersionedCache(10)
    assert cache.get("q", 1) is None
    cache.put("q", 1, 42)
    assert cache.get("q", 1) == 42
    assert cache.get("other", 1) is None


def test_a_new_version_forgets_every_answer() -> None:
    cache: VersionedCache[str, int] = VersionedCache(10)
    cache.get("a", 1)
    cache.put("a", 1, 1)
    cache.put("b", 1, 2)
    assert cache.get("a", 2) is None
    assert len(cache) == 0
    assert cache.get("b", 1) is None  # going back is another change, not the old answers


def test_an_answer_computed_before_a_change_is_not_kept() -> None:
    cache: VersionedCache[str, int] = VersionedCache(10)
    assert cache.get("q", 1) is None  # planned at version 1 ...
    assert cache.get("other", 2) is None  # ... while the node moved on
    cache.put("q", 1, 42)
    assert cache.get("q", 2) is None
    assert len(cache) == 0


def test_an_unknown_version_caches_nothing() -> None:
    cache: VersionedCache[str, int] = VersionedCache(10)
    assert cache.get("q", None) is None
    cache.put("q", None, 42)
    assert len(cache) == 0


def test_an_answer_is_kept_until_its_deadline() -> None:
    clock = ManualClock(100.0)
    cache: VersionedCache[str, int] = VersionedCache(10, clock=clock)
    cache.get("token", 1)
    cache.put("token", 1, 7, until=clock.now + 5)
    clock.now += 4.9
    assert cache.get("token", 1) == 7
    clock.now += 0.1
    assert cache.get("token", 1) is None
    assert len(cache) == 0


def test_the_least_recently_used_answer_goes_first() -> None:
    cache: VersionedCache[int, int] = VersionedCache(3)
    cache.get(0, "v")
    for key in range(3):
        cache.put(key, "v", key)
    assert cache.get(0, "v") == 0  # 1 is now the least recently used
    cache.put(3, "v", 3)
    assert len(cache) == 3
    assert cache.get(1, "v") is None
    assert [cache.get(key, "v") for key in (0, 2, 3)] == [0, 2, 3]
