"""Both reader interfaces in memory: fast unit tests of the engine, and a reference for new backends.

The realtime reader keeps the Redis layout's shape (per generation, view, key and day a hash of
``pv``/``pv:HH``/``sk``/``sk:HH``; per generation, view and day a ranking), so a test writes the
same fields the speed layer writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from serving_layer.model import (
    GENERATION_ZERO,
    BatchDoc,
    BatchUnavailable,
    GenerationInfo,
    HashRead,
    RankRead,
    RealtimeSnapshot,
    RealtimeUnavailable,
    Served,
    SpeedCommit,
)
from serving_layer.readers import DocRef


@dataclass
class MemoryBatchReader:
    generations: dict[int, GenerationInfo] = field(default_factory=dict)
    served: int | None = None
    docs: dict[tuple[str, int, str, str], BatchDoc] = field(default_factory=dict)
    """(view, holder generation, key, day) -> document."""
    rankings: dict[tuple[str, int, str], list[tuple[str, int]]] = field(default_factory=dict)
    down: bool = False
    reads: int = 0

    def _check(self) -> None:
        if self.down:
            raise BatchUnavailable("memory batch reader is down")

    async def generation(self, gen: int) -> GenerationInfo:
        self._check()
        if gen not in self.generations and gen == GENERATION_ZERO.gen:
            return GENERATION_ZERO
        try:
            return self.generations[gen]
        except KeyError:
            raise BatchUnavailable(f"generation {gen} is not in the registry") from None

    async def served_generation(self) -> GenerationInfo | None:
        self._check()
        return None if self.served is None else self.generations[self.served]

    async def documents(
        self, view: str, refs: Sequence[DocRef], hour_sketches: Sequence[bool] = ()
    ) -> list[BatchDoc | None]:
        """Documents as stored, but without their hour sketches unless asked: the strictest store,
        one that keeps every document's apart, so a query that forgets to ask fails its tests."""
        self._check()
        self.reads += len(refs)
        wanted = list(hour_sketches) or [False] * len(refs)
        out = [self.docs.get((view, *ref)) for ref in refs]
        return [
            d if d is None or w else BatchDoc(d.pv, d.uv, d.sk, d.h_pv, d.h_uv, None)
            for d, w in zip(out, wanted, strict=True)
        ]

    async def ranking(self, view: str, holder: int, day: str) -> list[tuple[str, int]]:
        self._check()
        try:
            return self.rankings[(view, holder, day)]
        except KeyError:
            raise BatchUnavailable(f"no ranking for {view} {day} in generation {holder}") from None

    async def ping(self) -> None:
        self._check()


@dataclass
class MemoryRealtimeReader:
    served: Served | None = None
    commit: SpeedCommit = field(default_factory=SpeedCommit)
    hashes: dict[tuple[int, str, str, str], dict[str, bytes]] = field(default_factory=dict)
    """(generation, view, key, day) -> field -> value."""
    ranks: dict[tuple[int, str, str], dict[str, float]] = field(default_factory=dict)
    stats: dict[str, object] | None = None
    views: dict[int, frozenset[str]] = field(default_factory=dict)
    """generation -> the views (``name@fingerprint``) the speed layer counted it with."""
    down: bool = False

    def _check(self) -> None:
        if self.down:
            raise RealtimeUnavailable("memory realtime reader is down")

    async def snapshot(self, hashes: Sequence[HashRead], ranks: Sequence[RankRead]) -> RealtimeSnapshot:
        self._check()
        if self.served is None:
            return RealtimeSnapshot(None, self.commit, [], [])
        g = self.served.gen
        return RealtimeSnapshot(
            self.served,
            self.commit,
            [self._fields(g, h) for h in hashes],
            [sorted(self.ranks.get((g, r.view, r.day), {}).items()) for r in ranks],
            self.views.get(g),
        )

    def _fields(self, gen: int, h: HashRead) -> dict[str, bytes]:
        stored = self.hashes.get((gen, h.view, h.key, h.day), {})
        return {f: stored[f] for f in h.fields if f in stored}

    async def speed_stats(self) -> dict[str, object] | None:
        self._check()
        return self.stats

    async def ping(self) -> None:
        self._check()
