"""The bounded least-recently-used map the node's caches are built on."""

from __future__ import annotations

from storage.lru import Lru


def test_the_least_recently_used_goes_first() -> None:
    lru: Lru[str, int] = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "b" is now the least recently used
    lru.put("c", 3)
    assert "b" not in lru
    assert lru.get("a") == 1
    assert lru.get("c") == 3
    assert len(lru) == 2


def test_putting_again_makes_a_key_the_most_recent() -> None:
    lru: Lru[str, int] = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    lru.put("a", 10)
    lru.put("c", 3)
    assert "b" not in lru
    assert lru.get("a") == 10


def test_oldest_pop_and_clear() -> None:
    lru: Lru[str, int] = Lru(3)
    assert lru.oldest() is None
    lru.pop_oldest()  # nothing to forget
    lru.put("a", 1)
    lru.put("b", 2)
    assert "a" in lru  # asking does not use it
    assert lru.oldest() == 1
    lru.pop_oldest()
    assert lru.oldest() == 2
    assert lru.pop("b") == 2
    assert lru.pop("b") is None
    lru.put("c", 3)
    lru.clear()
    assert len(lru) == 0
    assert lru.get("c") is None


def test_peek_does_not_use_a_key_and_values_and_items_go_oldest_first() -> None:
    lru: Lru[str, int] = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.peek("a") == 1  # "a" stays the least recently used
    assert lru.peek("z") is None
    assert lru.values() == [1, 2]
    lru.put("c", 3)
    assert "a" not in lru
    assert lru.values() == [2, 3]
    assert lru.items() == [("b", 2), ("c", 3)]
    lru.get("b")
    assert lru.items() == [("c", 3), ("b", 2)]
