"""stores.mongo.cache: the batch-document cache stays within its byte bound, least recently used
out first, and counts what /metrics reports."""

from __future__ import annotations

from stores.mongo.cache import LruCache


def test_the_byte_bound_evicts_the_least_recently_used() -> None:
    cache: LruCache[str | None] = LruCache(100)
    cache.put("a", "x", 60)
    cache.put("b", None, 30)
    assert cache.get("a") == (True, "x")  # a is now the most recently used
    cache.put("c", "z", 30)
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, "x") and cache.get("c") == (True, "z")
    assert cache.bytes == 90


def test_a_stored_none_is_found_and_a_value_larger_than_the_cache_is_not_stored() -> None:
    cache: LruCache[str | None] = LruCache(50)
    cache.put("missing", None, 10)
    cache.put("huge", "y", 51)
    assert cache.get("missing") == (True, None)
    assert cache.get("huge") == (False, None)
    assert cache.bytes == 10


def test_replacing_an_entry_counts_its_new_size_once() -> None:
    cache: LruCache[str] = LruCache(100)
    cache.put("a", "x", 40)
    cache.put("a", "xx", 70)
    assert cache.bytes == 70 and cache.get("a") == (True, "xx")


def test_hits_and_misses_are_counted() -> None:
    cache: LruCache[int] = LruCache(10)
    cache.put("a", 1, 1)
    cache.get("a")
    cache.get("a")
    cache.get("b")
    assert (cache.hits, cache.misses) == (2, 1)
