"""The answer cache's rule, without services: whatever the order of queries and commits, every body
it returns is the one a fresh computation at that moment gives, and it keeps within its bound.

The realtime reader is a stand-in whose stamp is a version number a commit bumps (the Redis
reader's stamp and its rule are tested on the real Redis in tests/integration/api)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from api.answer_cache import AnswerCache
from serving_layer.answers import Coverage
from serving_layer.model import DayRead, RankRead, RealtimeSnapshot, RealtimeUnavailable, Served, SpeedCommit


class Versioned:
    """Realtime state as a version: each commit bumps it; ``stamped`` False: a store without stamps."""

    def __init__(self, stamped: bool = True) -> None:
        self.version = 0
        self.stamped = stamped
        self.down = False
        self.reads = 0

    async def snapshot(self, days: Sequence[DayRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        self.reads += 1
        if self.down:
            raise RealtimeUnavailable("down")
        stamp = ("v", self.version) if self.stamped else None
        return RealtimeSnapshot(Served(1, {}), SpeedCommit(self.version, {}), [], [], stamp=stamp)

    async def stamp(self) -> Hashable | None:
        return (await self.snapshot((), ())).stamp

    async def speed_stats(self) -> dict[str, object] | None:
        return None

    async def ping(self) -> None:
        return None


@dataclass(frozen=True)
class Answer:
    value: str
    coverage: Coverage


def coverage(stamp: Hashable | None) -> Coverage:
    return Coverage(1, {}, datetime(2026, 1, 1, tzinfo=UTC), {}, stamp is None, (), (), stamp)


def computer(store: Versioned, key: str) -> Answer:
    """What the engine would answer for ``key`` now: its value follows the state, its stamp too."""
    stamp = ("v", store.version) if store.stamped and not store.down else None
    return Answer(f"{key}@{store.version}" + ("!partial" if store.down else ""), coverage(stamp))


def fresh(store: Versioned, key: str) -> bytes:
    return computer(store, key).value.encode()


def ask(cache: AnswerCache, store: Versioned, key: str | None) -> bytes:
    async def compute() -> Answer:
        with contextlib.suppress(RealtimeUnavailable):  # the engine's own read; down: partial
            await store.snapshot((), ())
        return computer(store, key or "after")

    return asyncio.run(cache.answer(key, compute, lambda a: a.value.encode()))


OPS = st.lists(
    st.one_of(
        st.sampled_from(["commit", "down", "up", "after"]),
        st.sampled_from(["a", "b", "c", "d" * 300]),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(OPS, st.booleans(), st.sampled_from([0, 700, 1 << 20]))
def test_every_body_is_the_fresh_answer_and_the_cache_stays_in_its_bound(
    ops: list[str], stamped: bool, bound: int
) -> None:
    store = Versioned(stamped)
    cache = AnswerCache(store, bound)
    for op in ops:
        if op == "commit":
            store.version += 1
        elif op in ("down", "up"):
            store.down = op == "down"
        elif op == "after":
            assert ask(cache, store, None) == fresh(store, "after")
        else:
            assert ask(cache, store, op) == fresh(store, op)
        assert cache.cached_bytes <= max(bound, 0)
    if not stamped or bound == 0:
        assert cache.hits == 0 and len(cache) == 0


def test_a_repeated_query_is_one_small_read_until_a_commit() -> None:
    store = Versioned()
    cache = AnswerCache(store, 1 << 20)
    assert ask(cache, store, "a") == b"a@0"
    reads = store.reads
    for _ in range(5):
        assert ask(cache, store, "a") == b"a@0"
    assert (cache.hits, cache.misses, store.reads - reads) == (5, 1, 5)
    store.version += 1
    assert ask(cache, store, "a") == b"a@1"
    assert (cache.hits, cache.misses, cache.stale) == (5, 2, 1)


def test_an_answer_larger_than_the_bound_is_not_kept() -> None:
    store = Versioned()
    cache = AnswerCache(store, 100)
    assert ask(cache, store, "x" * 200) == fresh(store, "x" * 200)
    assert len(cache) == 0 and cache.cached_bytes == 0
