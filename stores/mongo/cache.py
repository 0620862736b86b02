"""An LRU cache bounded by bytes, for immutable batch documents: cachetools' LRUCache, sized by
the bytes each entry declares, with the hit and miss counts /metrics reports.

A published generation's documents never change, so caching them per (view, holding generation,
key, day) needs no invalidation: a new generation refers to new holders for the days it rewrote
and the old entries simply age out. An uncached read costs a round trip and an indexed lookup (~3 ms
p50 on the local FerretDB, bench/store.py; a 7-day query reads 8 documents), a cached one about a
microsecond: this cache is what keeps a hot query at a fraction of a millisecond and the database
out of the hot path.
"""

from __future__ import annotations

from collections.abc import Hashable
from operator import itemgetter
from typing import Generic, TypeVar

from cachetools import LRUCache

V = TypeVar("V")


class LruCache(Generic[V]):
    def __init__(self, max_bytes: int) -> None:
        self.hits = 0
        self.misses = 0
        # Entries are (value, size): a stored None is a value (a document known not to exist).
        self._entries: LRUCache[Hashable, tuple[V, int]] = LRUCache(max_bytes, getsizeof=itemgetter(1))

    @property
    def max_bytes(self) -> int:
        return int(self._entries.maxsize)

    @property
    def bytes(self) -> int:
        return int(self._entries.currsize)

    def get(self, key: Hashable) -> tuple[bool, V | None]:
        """(found, value); a stored None is a found value (a document known not to exist)."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return False, None
        self.hits += 1
        return True, entry[0]

    def put(self, key: Hashable, value: V, size: int) -> None:
        """Caches ``value`` as ``size`` bytes, evicting the least recently used entries to stay
        within the bound; a value larger than the whole cache is not cached."""
        if size <= self.max_bytes:
            self._entries[key] = (value, size)
