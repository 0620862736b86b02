"""The consistent read every query starts with: one generation, its realtime values, its coverage.

One atomic realtime read returns the served generation ``g``, the speed layer's commit and the
realtime values of ``g`` the query needs; ``g``'s description then comes from the batch side.
Everything the answer holds comes from that ``g``. With realtime unreadable, the durable registry
names the served generation and the snapshot is the batch side alone, flagged ``partial``.
A read-your-writes query takes snapshots until one covers its offsets, or gives up; while it waits
it polls only the served pointer and the speed layer's commit (a read of a few keys,
whatever the query reads), at growing intervals (``poll_s`` doubled up to :data:`MAX_POLL_S`), and
reads the query's values once they cover the offsets.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from serving_layer.answers import Coverage, lost_of
from serving_layer.consistency import pending
from serving_layer.model import (
    ConsistencyTimeout,
    DayRead,
    GenerationInfo,
    NothingServed,
    RankRead,
    RealtimeDay,
    RealtimeUnavailable,
)
from serving_layer.queries import ReadAfter
from stores.batch_views import BatchReader
from stores.realtime_views import EMPTY_DAY, RealtimeReader

log = logging.getLogger(__name__)

REALTIME = "realtime"
MAX_POLL_S = 0.25
"""Longest pause between two polls of a waiting query: what a wait may add to its answer's delay."""


@dataclass
class Snapshot:
    gen: GenerationInfo
    days: list[RealtimeDay]
    ranks: list[list[tuple[str, int]]]
    coverage: Coverage
    views: frozenset[str] | None = None
    """What the speed layer counted the generation with (None: nothing counted, or Redis down)."""
    visit_flags: frozenset[tuple[str, str]] = frozenset()
    """(site, day) whose realtime visits may not be exact."""
    full: bool = True
    """Holds the query's values (False: a waiting query's poll of the pointer and commit only)."""


class Snapshots:
    """Takes the snapshots of one engine's queries from its two readers."""

    def __init__(
        self,
        batch: BatchReader,
        realtime: RealtimeReader,
        on_degraded: Callable[[str, Exception], None],
        on_generation: Callable[[GenerationInfo], None],
        poll_s: float,
    ) -> None:
        self.batch = batch
        self.realtime = realtime
        self.on_degraded = on_degraded
        self.on_generation = on_generation
        """Sees every generation a realtime snapshot serves (the engine learns views from it)."""
        self.poll_s = poll_s

    async def take(
        self, days: Sequence[DayRead], ranks: Sequence[RankRead], after: ReadAfter | None
    ) -> Snapshot:
        """A snapshot that covers ``after``'s offsets (any snapshot without it); raises
        ConsistencyTimeout naming the partitions still pending once ``after.wait_s`` has passed."""
        started = time.monotonic()
        snap = await self.once(days, ranks)
        if after is None:
            return snap
        interval = self.poll_s
        while True:
            cov = snap.coverage
            missing = pending(after.offsets, cov.batch_offsets, cov.realtime_offsets)
            if not missing:
                if snap.full:
                    return snap
                snap = await self.once(days, ranks)  # covered: now read the query's values
                continue
            waited = time.monotonic() - started
            if waited >= after.wait_s:
                raise ConsistencyTimeout(missing, waited)
            await asyncio.sleep(min(interval, after.wait_s - waited))
            interval = min(2 * interval, MAX_POLL_S)
            snap = await self.once((), ())  # only the pointer and the commit, until they cover
            snap.full = not days and not ranks

    async def once(self, days: Sequence[DayRead], ranks: Sequence[RankRead]) -> Snapshot:
        try:
            rt = await self.realtime.snapshot(days, ranks)
        except RealtimeUnavailable as exc:
            log.warning("answering from the batch views alone: %s", exc)
            self.on_degraded("redis", exc)
            rt = None
        if rt is not None and rt.served is not None:
            gen = await self.batch.generation(rt.served.gen)
            self.on_generation(gen)
            coverage = Coverage(
                gen.gen, gen.cut, gen.started_at, rt.commit.offsets, False, (), lost_of(gen), rt.stamp
            )
            return Snapshot(gen, rt.days, rt.ranks, coverage, rt.views, rt.visit_flags)
        # Redis is down or has lost its data: the durable registry names the served generation.
        served = await self.batch.served_generation()
        if served is None:
            raise NothingServed("no generation has been published yet")
        coverage = Coverage(
            served.gen, served.cut, served.started_at, None, True, (REALTIME,), lost_of(served)
        )
        return Snapshot(served, [EMPTY_DAY for _ in days], [[] for _ in ranks], coverage)
