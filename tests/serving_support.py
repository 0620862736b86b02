"""Views built in Python from events, for the serving tests: view rows, batch documents and
realtime hashes computed the oracle's way (tests.oracle).

:func:`generation_views` computes a served generation's views once; each backend of the serving
suite (tests.serving_suite) writes its rows through that backend's write halves (batch writer,
realtime sink) and reads them through its read halves: :class:`MemoryBackend` here, on
stores.memory, and tests.integration.serving_fixtures' StoreBackend on MongoDB and Redis.
:func:`commit_realtime` is a stand-in for one speed-layer micro-batch (same Redis layout,
stores.redis.keys), for tests that need commits to move while queries run.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import redis
from datasketches import hll_sketch, tgt_hll_type

from contract import PageView
from generations.model import Generation
from generations.state import GenerationState
from serving_layer import QueryEngine
from serving_layer.model import BatchDoc, Served, SpeedCommit
from stores.batch_views import BatchReader
from stores.memory import MemoryBatchStore, MemoryRealtimeStore, MemoryTransaction
from stores.realtime_views import RealtimeReader
from stores.redis import keys
from tests.oracle import DIMENSION_KEYS, Bucket, dedup, recount
from views.registry import view_mark

LG_K = 12
VIEW_KEYS: dict[str, Callable[[PageView], str]] = DIMENSION_KEYS
TEST_FINGERPRINT = "test"
T = TypeVar("T")


@dataclass(frozen=True)
class Logged:
    """An event with its position in the log."""

    partition: int
    offset: int
    event: PageView


def sketch_bytes(visitors: Iterable[str]) -> bytes | None:
    sketch = hll_sketch(LG_K, tgt_hll_type.HLL_8)
    n = 0
    for v in visitors:
        sketch.update(v)
        n += 1
    return bytes(sketch.serialize_compact()) if n else None


def batch_doc(b: Bucket) -> BatchDoc:
    return BatchDoc(
        pv=b.pv,
        uv=len(b.visitors),
        sk=sketch_bytes(b.visitors),
        h_pv=list(b.hours_pv),
        h_uv=[len(v) for v in b.hours_visitors],
        h_sk=[sketch_bytes(v) for v in b.hours_visitors],
    )


def view_row(view: str, key: str, day: str, b: Bucket) -> dict[str, Any]:
    """A bucket as the view row both layers write (views.rows, with its ``view``)."""
    hours = [
        {"hour": h, "pv": pv, "uv": len(b.hours_visitors[h]), "sk": sketch_bytes(b.hours_visitors[h])}
        for h, pv in enumerate(b.hours_pv)
        if pv
    ]
    return {
        "view": view,
        "key": key,
        "day": day,
        "pv": b.pv,
        "uv": len(b.visitors),
        "sk": sketch_bytes(b.visitors),
        "hours": hours,
    }


def realtime_fields(b: Bucket) -> dict[str, bytes]:
    """The hash the speed layer keeps for one (generation, view, key, day)."""
    fields: dict[str, bytes] = {keys.PV: str(b.pv).encode()}
    sk = sketch_bytes(b.visitors)
    if sk is not None:
        fields[keys.SKETCH] = sk
    for hour, pv in enumerate(b.hours_pv):
        if pv:
            fields[keys.hour_field(keys.PV, hour)] = str(pv).encode()
            hour_sk = sketch_bytes(b.hours_visitors[hour])
            assert hour_sk is not None
            fields[keys.hour_field(keys.SKETCH, hour)] = hour_sk
    return fields


def split(logged: Sequence[Logged], cut: dict[int, int]) -> tuple[list[PageView], list[PageView]]:
    """(events below the cut, events at or above it)."""
    below = [x.event for x in logged if x.offset < cut.get(x.partition, 0)]
    above = [x.event for x in logged if x.offset >= cut.get(x.partition, 0)]
    return below, above


def end_offsets(logged: Iterable[Logged]) -> dict[int, int]:
    out: dict[int, int] = {}
    for x in logged:
        out[x.partition] = max(out.get(x.partition, 0), x.offset + 1)
    return out


@dataclass(frozen=True)
class GenerationViews:
    """One served generation's views, computed the oracle's way: the rows a backend's write halves
    store, and what its read halves must give back.

    Computed once here and written by each backend (in memory, or MongoDB and Redis) through its
    writer and its sink, so that the serving suite checks every backend, both halves, against the
    same views."""

    info: Generation
    batch_rows: list[dict[str, Any]]
    """The view rows below the cut, for the batch writer."""
    realtime_rows: list[dict[str, Any]]
    """The view rows at or above the cut, for the realtime sink (one micro-batch)."""
    docs: dict[tuple[str, str, str], BatchDoc]
    """(view, key, day) -> batch document."""
    rankings: dict[tuple[str, str], list[tuple[str, int]]]
    """(view, day) -> the day's keys by page views, descending (ties by key)."""
    hashes: dict[tuple[str, str, str], dict[str, bytes]]
    """(view, key, day) -> the realtime hash."""
    ranks: dict[tuple[str, str], dict[str, float]]
    """(view, day) -> key -> realtime page views (the sorted set)."""
    counted: frozenset[str]
    """The views (``name@fingerprint``) the speed layer counted the generation with."""
    commit: SpeedCommit

    @property
    def days(self) -> dict[str, list[str]]:
        """view -> the days the generation's batch views hold (what the batch writer writes)."""
        return {view: sorted(days) for view, days in self.info.day_map.items()}


def generation_views(
    gen: int, cut: dict[int, int], logged: Sequence[Logged], commit: dict[int, int] | None = None
) -> GenerationViews:
    """``gen`` as served: batch views of the events below ``cut``, realtime views of those at or
    above it up to ``commit`` (default: all of them)."""
    commit = commit if commit is not None else end_offsets(logged)
    visible = [x for x in logged if x.offset < max(commit.get(x.partition, 0), cut.get(x.partition, 0))]
    below, above = split(visible, cut)
    day_map: dict[str, dict[str, int]] = {}
    docs: dict[tuple[str, str, str], BatchDoc] = {}
    rankings: dict[tuple[str, str], list[tuple[str, int]]] = {}
    batch_rows: list[dict[str, Any]] = []
    for view, buckets in recount(below).items():
        day_map[view] = {day: gen for _, day in buckets}
        by_day: dict[str, list[tuple[str, int]]] = {}
        for (key, day), b in buckets.items():
            docs[(view, key, day)] = batch_doc(b)
            batch_rows.append(view_row(view, key, day, b))
            by_day.setdefault(day, []).append((key, b.pv))
        for day, counts in by_day.items():
            rankings[(view, day)] = sorted(counts, key=lambda kv: (-kv[1], kv[0]))
    now = datetime.now(UTC)
    info = Generation(
        gen=gen,
        kind="full",
        state=GenerationState.SERVED,
        cut=dict(cut),
        started_at=now,
        finished_at=now,
        served_at=now,
        day_map=day_map,
        fingerprints={view: TEST_FINGERPRINT for view in VIEW_KEYS},
        views={view: {"per_site": view not in ("page", "site")} for view in VIEW_KEYS},
    )
    hashes: dict[tuple[str, str, str], dict[str, bytes]] = {}
    ranks: dict[tuple[str, str], dict[str, float]] = {}
    realtime_rows: list[dict[str, Any]] = []
    for view, buckets in recount(above).items():
        for (key, day), b in buckets.items():
            hashes[(view, key, day)] = realtime_fields(b)
            realtime_rows.append(view_row(view, key, day, b))
            ranks.setdefault((view, day), {})[key] = float(b.pv)
    counted = frozenset(view_mark(view, TEST_FINGERPRINT) for view in VIEW_KEYS)
    return GenerationViews(
        info, batch_rows, realtime_rows, docs, rankings, hashes, ranks, counted, SpeedCommit(0, dict(commit))
    )


class ServingBackend(ABC):
    """Where the serving suite's views are stored (tests.serving_suite), and the readers of them.

    A backend writes :func:`generation_views`' state in its stores and makes the changes the
    suite's cases need; :meth:`query` is the same for every backend: a fresh engine on its readers,
    in an event loop of its own (the async clients of real stores belong to the loop that opened
    them)."""

    @abstractmethod
    def load(self, cut: dict[int, int], logged: Sequence[Logged]) -> int:
        """Publish a new served generation: batch views of the events below ``cut``, realtime views
        of the rest, the speed layer's commit at the log's end. Returns the generation's number."""

    @abstractmethod
    def readers(
        self, *, batch_down: bool, realtime_down: bool
    ) -> AbstractAsyncContextManager[tuple[BatchReader, RealtimeReader]]:
        """The readers of the stores, either one reading a store that is down if asked."""

    def query(
        self,
        ask: Callable[[QueryEngine], Awaitable[T]],
        *,
        batch_down: bool = False,
        realtime_down: bool = False,
    ) -> T:
        """``ask`` a fresh engine on this backend's readers."""

        async def go() -> T:
            async with self.readers(batch_down=batch_down, realtime_down=realtime_down) as (batch, realtime):
                return await ask(QueryEngine(batch, realtime, poll_s=0.001))

        return asyncio.run(go())

    def read_back(self, read: Callable[[BatchReader, RealtimeReader], Awaitable[T]]) -> T:
        """``read`` this backend's stores through its readers directly (no engine)."""

        async def go() -> T:
            async with self.readers(batch_down=False, realtime_down=False) as (batch, realtime):
                return await read(batch, realtime)

        return asyncio.run(go())

    @abstractmethod
    def commit(self) -> SpeedCommit: ...

    @abstractmethod
    def set_commit(self, commit: SpeedCommit) -> None:
        """Move the speed layer's commit (called while a query waits)."""

    @abstractmethod
    def forget_counted_view(self, gen: int, view: str | None) -> None:
        """The speed layer has not counted ``view`` for ``gen`` (None: nothing at all)."""

    @abstractmethod
    def forget_batch_view(self, gen: int, view: str) -> None:
        """``gen`` has no batch views of ``view``."""

    @abstractmethod
    def add_to_ranking(self, view: str, gen: int, day: str, key: str, pageviews: int) -> None:
        """A key in a stored batch ranking (the suite uses it for malformed keys)."""


@dataclass
class MemoryBackend(ServingBackend):
    """The serving suite's backend in memory (stores.memory): no services, so the property
    tests can try hundreds of logs and cuts."""

    batch: MemoryBatchStore = field(default_factory=MemoryBatchStore)
    realtime: MemoryRealtimeStore = field(default_factory=MemoryRealtimeStore)

    def load(self, cut: dict[int, int], logged: Sequence[Logged]) -> int:
        gen = max(self.batch.generations, default=0) + 1
        v = generation_views(gen, cut, logged)
        written = self.batch.write(gen, v.batch_rows, v.days)
        for view, entries in written.entries.items():
            self.batch.write_rankings(view, gen, entries, v.days[view])
        self.batch.generations[gen] = v.info
        sink = self.realtime.sink()
        for row in v.realtime_rows:
            sink.add(gen, row["view"], row)
        sink.prepare()
        txn: MemoryTransaction = []
        sink.flush(txn)
        for apply in txn:
            apply()
        self.realtime.views[gen] = v.counted
        self.batch.served = gen
        self.realtime.served = Served(gen, dict(cut))
        self.realtime.commit = v.commit
        return gen

    @contextlib.asynccontextmanager
    async def readers(
        self, *, batch_down: bool, realtime_down: bool
    ) -> AsyncIterator[tuple[BatchReader, RealtimeReader]]:
        self.batch.down, self.realtime.down = batch_down, realtime_down
        try:
            yield self.batch, self.realtime
        finally:
            self.batch.down = self.realtime.down = False

    def commit(self) -> SpeedCommit:
        return self.realtime.commit

    def set_commit(self, commit: SpeedCommit) -> None:
        self.realtime.commit = commit

    def forget_counted_view(self, gen: int, view: str | None) -> None:
        if view is None:
            del self.realtime.views[gen]
        else:
            self.realtime.views[gen] = frozenset(
                m for m in self.realtime.views[gen] if not m.startswith(f"{view}@")
            )

    def forget_batch_view(self, gen: int, view: str) -> None:
        info = self.batch.generations[gen]
        day_map = {v: d for v, d in info.day_map.items() if v != view}
        self.batch.generations[gen] = replace(info, day_map=day_map)

    def add_to_ranking(self, view: str, gen: int, day: str, key: str, pageviews: int) -> None:
        ranking = [*self.batch.rankings[(view, gen, day)], (key, pageviews)]
        self.batch.rankings[(view, gen, day)] = sorted(ranking, key=lambda kv: (-kv[1], kv[0]))


def commit_realtime(client: redis.Redis, logged: Sequence[Logged], upto: dict[int, int]) -> None:
    """Stand-in for one speed-layer micro-batch commit: for every active generation, its realtime
    views of the events at or above its cut and below ``upto``, written with the commit record in
    one transaction under WATCH of the active set (as the generation handshake requires)."""

    def attempt(pipe: redis.client.Pipeline) -> None:
        active = keys.decode_active(pipe.get(keys.ACTIVE))
        previous = keys.decode_commit(pipe.get(keys.SPEED_COMMIT))
        pipe.multi()
        for gen, cut in active.items():
            events = [
                x.event for x in logged if cut.get(x.partition, 0) <= x.offset < upto.get(x.partition, 0)
            ]
            for view, buckets in recount(events).items():
                for (key, day), b in buckets.items():
                    name = keys.realtime_key(gen, view, key, day)
                    pipe.delete(name)
                    pipe.hset(name, mapping=dict(realtime_fields(b)))
                    pipe.zadd(keys.realtime_rank_key(gen, view, day), {key: b.pv})
        pipe.set(keys.SPEED_COMMIT, keys.encode_commit(keys.SpeedCommit(previous.batch_id + 1, dict(upto))))

    client.transaction(attempt, keys.ACTIVE, keys.SPEED_COMMIT)


def count(
    events: Iterable[PageView], view: str, key: str, start: datetime, end: datetime
) -> tuple[int, set[str]]:
    """(page views, visitors) of a key in ``[start, end)``: the oracle's answer to a range query."""
    key_of = VIEW_KEYS[view]
    pv, visitors = 0, set()
    for e in dedup(events):
        if key_of(e) == key and start <= e.ts < end:
            pv += 1
            visitors.add(e.visitor_id)
    return pv, visitors


def assert_estimate(answer: Any, exact: int) -> None:
    """An HLL answer within its stated error of the exact count (small sets are near exact)."""
    if answer["exact"] if isinstance(answer, dict) else answer.exact:
        got = answer["estimate"] if isinstance(answer, dict) else answer.estimate
        assert got == exact
        return
    est = answer["estimate"] if isinstance(answer, dict) else answer.estimate
    assert abs(est - exact) <= max(2.0, 0.05 * exact), (est, exact)
