"""The serving layer without services: tiling properties, and the engine's merge on in-memory
readers checked against a recount of the events."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract import PageView
from serving_layer import (
    BatchUnavailable,
    ConsistencyTimeout,
    Granularity,
    InvalidQuery,
    QueryEngine,
    ReadAfter,
    SeriesQuery,
    TopQuery,
    check_range,
)
from serving_layer.cache import LruCache
from serving_layer.consistency import decode_token, encode_token, pending
from serving_layer.memory import MemoryBatchReader, MemoryRealtimeReader
from serving_layer.tiling import DAY, HOUR, buckets, tile
from tests.serving_support import Logged, assert_estimate, count, load_memory

BASE = datetime(2026, 11, 10, tzinfo=UTC)
URLS = [f"https://shop.example.com/p{i}" for i in range(6)] + ["https://blog.example.com/"]
REFERRERS = [None, "https://www.google.com/", "https://shop.example.com/p1", "https://t.co/x"]
COUNTRIES = [None, "DE", "US", "FR"]
AGENTS = [
    None,
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148",
    "curl/8.5.0",
    "Mozilla/5.0",
]


def hours(n: int) -> timedelta:
    return timedelta(hours=n)


# --- tiling ---------------------------------------------------------------------------------------
ranges = st.tuples(st.integers(0, 24 * 40), st.integers(1, 24 * 20)).map(
    lambda t: (BASE + hours(t[0]), BASE + hours(t[0] + t[1]))
)


@given(ranges)
def test_tiles_cover_the_range_exactly_with_the_coarsest_buckets(rng: tuple[datetime, datetime]) -> None:
    start, end = rng
    tiles = tile(start, end)
    covered = []
    for t in tiles:
        covered += [t.start + hours(h) for h in range(int(t.length / HOUR))]
        if t.hour is None:
            assert start <= t.start and t.start + DAY <= end
    assert covered == [start + hours(h) for h in range(int((end - start) / HOUR))]
    # coarsest: a day is never made of hour tiles when it lies whole inside the range
    hour_days = {t.day for t in tiles if t.hour is not None}
    assert len(hour_days) <= 2
    assert sum(t.hour is not None for t in tiles) <= 46


@given(ranges, st.sampled_from(list(Granularity)))
def test_buckets_partition_the_range(rng: tuple[datetime, datetime], granularity: Granularity) -> None:
    start, end = rng
    bs = buckets(start, end, granularity)
    assert bs[0].start == start and bs[-1].end == end
    for a, b in itertools.pairwise(bs):
        assert a.end == b.start
    for b in bs:
        assert sum((t.length for t in b.tiles), timedelta()) == b.end - b.start
        assert all(b.start <= t.start and t.start + t.length <= b.end for t in b.tiles)
        if granularity is Granularity.DAY:
            assert b.start.date() == (b.end - HOUR).date()


def test_check_range_names_the_parameter() -> None:
    with pytest.raises(InvalidQuery, match="from: must be before to"):
        check_range(BASE, BASE, 10)
    with pytest.raises(InvalidQuery, match="from: must be a whole hour"):
        check_range(BASE + timedelta(minutes=5), BASE + DAY, 10)
    with pytest.raises(InvalidQuery, match="to: the range exceeds the maximum of 10 days"):
        check_range(BASE, BASE + 11 * DAY, 10)


def test_offsets_tokens() -> None:
    token = encode_token({0: 5, 3: 17})
    assert decode_token(token) == {0: 5, 3: 17}
    for bad in ("x", "o1.!!!", "o1." + "e30K" * 3, encode_token({0: 1})[:-2] + "zz"):
        with pytest.raises(InvalidQuery, match="after: "):
            decode_token(bad)
    assert pending({0: 5, 1: 9}, cut={0: 5}, committed={1: 8}) == {1: 9}
    assert pending({0: 5, 1: 9}, cut={0: 2}, committed={0: 5, 1: 9}) == {}


def test_lru_cache_is_bounded_by_bytes() -> None:
    cache: LruCache[str | None] = LruCache(100)
    cache.put("a", "x", 60)
    cache.put("b", None, 30)
    assert cache.get("a") == (True, "x")
    cache.put("c", "z", 30)  # evicts the least recently used: b
    assert cache.get("b") == (False, None) and cache.get("a")[0] and cache.bytes == 90


# --- the merge --------------------------------------------------------------------------------------
def make_events(rng: random.Random, n: int, days: int = 4) -> list[Logged]:
    out = []
    offsets = [0, 0]
    for i in range(n):
        ts = BASE + timedelta(seconds=rng.randrange(days * 86400))
        event = PageView(
            event_id=f"e{i}",
            ts=ts,
            visitor_id=f"v{rng.randrange(40)}",
            url=rng.choice(URLS),
            referrer=rng.choice(REFERRERS),
            country=rng.choice(COUNTRIES),
            user_agent=rng.choice(AGENTS),
        )
        p = rng.randrange(2)
        out.append(Logged(p, offsets[p], event))
        offsets[p] += 1
    return out


def engine_for(
    logged: list[Logged], cut: dict[int, int], gen: int = 1
) -> tuple[QueryEngine, MemoryBatchReader, MemoryRealtimeReader]:
    batch, realtime = MemoryBatchReader(), MemoryRealtimeReader()
    load_memory(batch, realtime, gen, cut, logged)
    return QueryEngine(batch, realtime, poll_s=0.001), batch, realtime


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cut_share=st.floats(0, 1),
    start_h=st.integers(0, 24 * 4),
    span_h=st.integers(1, 24 * 4),
    granularity=st.sampled_from(list(Granularity)),
    site=st.booleans(),
)
def test_merged_answers_equal_the_recount_wherever_the_cut_lies(
    seed: int, cut_share: float, start_h: int, span_h: int, granularity: Granularity, site: bool
) -> None:
    rng = random.Random(seed)
    logged = make_events(rng, 300)
    cut = {p: int(cut_share * sum(x.partition == p for x in logged)) for p in (0, 1)}
    engine, _, _ = engine_for(logged, cut)
    view, key = ("site", "shop.example.com") if site else ("page", rng.choice(URLS))
    start, end = BASE + hours(start_h), BASE + hours(start_h + span_h)
    q = SeriesQuery(view, key, start, end, granularity)
    events = [x.event for x in logged]

    pv = run(engine.pageviews(q))
    assert pv.total == count(events, view, key, start, end)[0]
    for point, b in zip(pv.series, buckets(start, end, granularity), strict=True):
        assert point.pageviews == count(events, view, key, b.start, b.end)[0]

    uv = run(engine.unique_visitors(q))
    assert_estimate(uv.total, len(count(events, view, key, start, end)[1]))
    for (_, d), b in zip(uv.series, buckets(start, end, granularity), strict=True):
        assert_estimate(d, len(count(events, view, key, b.start, b.end)[1]))
    assert not pv.coverage.partial


def test_unique_visitors_are_exact_only_from_batch_buckets_alone() -> None:
    logged = make_events(random.Random(1), 400)
    events = [x.event for x in logged]
    everything = {p: 10**6 for p in (0, 1)}
    engine, _, _ = engine_for(logged, everything)
    day = SeriesQuery("page", URLS[0], BASE, BASE + DAY, Granularity.DAY)
    uv = run(engine.unique_visitors(day))
    assert uv.total.exact
    assert uv.total.estimate == len(count(events, "page", URLS[0], BASE, BASE + DAY)[1])
    two_days = SeriesQuery("page", URLS[0], BASE, BASE + 2 * DAY, Granularity.DAY)
    uv2 = run(engine.unique_visitors(two_days))
    assert all(d.exact for _, d in uv2.series) and not uv2.total.exact  # a union of two days is an estimate

    engine_rt, _, _ = engine_for(logged, {0: 0, 1: 0})  # everything realtime
    assert not run(engine_rt.unique_visitors(day)).total.exact


def test_top_merges_batch_rankings_with_realtime() -> None:
    logged = make_events(random.Random(2), 500)
    events = [x.event for x in logged]
    engine, _, _ = engine_for(logged, {0: 120, 1: 100})
    answer = run(engine.top(TopQuery("page", BASE + hours(5), BASE + 2 * DAY + hours(3), limit=3)))
    assert (answer.start, answer.end) == (BASE, BASE + 3 * DAY)  # rounded outwards to whole days
    totals = {u: count(events, "page", u, BASE, BASE + 3 * DAY)[0] for u in URLS}
    expected = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert answer.entries == expected
    blog = run(engine.top(TopQuery("page", BASE, BASE + DAY, limit=5, site="blog.example.com")))
    assert [k for k, _ in blog.entries] == ["https://blog.example.com/"]


def test_redis_down_gives_a_flagged_batch_only_answer_and_mongo_down_no_answer() -> None:
    logged = make_events(random.Random(3), 300)
    cut = {0: 80, 1: 80}
    engine, batch, realtime = engine_for(logged, cut)
    realtime.down = True
    q = SeriesQuery("page", URLS[1], BASE, BASE + 4 * DAY, Granularity.DAY)
    answer = run(engine.pageviews(q))
    below = [x.event for x in logged if x.offset < cut[x.partition]]
    assert answer.coverage.partial and answer.coverage.missing == ("realtime",)
    assert answer.coverage.batch_offsets == cut and answer.coverage.realtime_offsets is None
    assert answer.total == count(below, "page", URLS[1], BASE, BASE + 4 * DAY)[0]
    batch.down = True
    with pytest.raises(BatchUnavailable):
        run(engine.pageviews(q))


def test_read_after_waits_for_the_commit_or_times_out() -> None:
    logged = make_events(random.Random(4), 100)
    engine, _, realtime = engine_for(logged, {0: 10, 1: 10})
    q = SeriesQuery("page", URLS[0], BASE, BASE + DAY, Granularity.HOUR)
    end = realtime.commit.offsets
    assert run(engine.pageviews(q, ReadAfter(end, 0.0))).total >= 0
    beyond = {0: end[0] + 5}
    with pytest.raises(ConsistencyTimeout) as err:
        run(engine.pageviews(q, ReadAfter(beyond, 0.02)))
    assert err.value.pending == beyond

    async def commit_later() -> int:
        async def advance() -> None:
            await asyncio.sleep(0.01)
            realtime.commit = type(realtime.commit)(1, {**end, 0: end[0] + 5})

        task = asyncio.create_task(advance())
        answer = await engine.pageviews(q, ReadAfter(beyond, 1.0))
        await task
        return answer.total

    assert run(commit_later()) >= 0


def test_a_generation_switch_is_read_from_one_snapshot() -> None:
    """Whichever generation the snapshot names, batch and realtime come from it: same totals."""
    logged = make_events(random.Random(5), 400)
    events = [x.event for x in logged]
    engine, batch, realtime = engine_for(logged, {0: 50, 1: 50}, gen=1)
    q = SeriesQuery("site", "shop.example.com", BASE, BASE + 4 * DAY, Granularity.DAY)
    before = run(engine.pageviews(q)).total
    load_memory(batch, realtime, 2, {0: 150, 1: 150}, logged)  # gen 2 published, realtime rebuilt
    after = run(engine.pageviews(q))
    assert after.coverage.generation == 2
    assert before == after.total == count(events, "site", "shop.example.com", BASE, BASE + 4 * DAY)[0]


# --- every dimension through the generic path ----------------------------------------------------------
def expected_breakdown(
    events: list[PageView], view: str, site: str | None, start: datetime, end: datetime
) -> dict[str, int]:
    from tests.oracle import DIMENSION_KEYS

    totals: dict[str, int] = {}
    for e in dedup_events(events):
        key = DIMENSION_KEYS[view](e)
        if start <= e.ts < end and (
            site is None or key.startswith(f"{site}|") or key.startswith(f"https://{site}/")
        ):
            totals[key] = totals.get(key, 0) + 1
    return totals


def dedup_events(events: list[PageView]) -> list[PageView]:
    from tests.oracle import dedup

    return dedup(events)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cut_share=st.floats(0, 1),
    view=st.sampled_from(["page", "referrer", "country", "device"]),
    days=st.integers(1, 4),
)
def test_breakdowns_of_every_dimension_equal_the_recount(
    seed: int, cut_share: float, view: str, days: int
) -> None:
    rng = random.Random(seed)
    logged = make_events(rng, 300)
    cut = {p: int(cut_share * sum(x.partition == p for x in logged)) for p in (0, 1)}
    engine, _, _ = engine_for(logged, cut)
    events = [x.event for x in logged]
    answer = run(engine.top(TopQuery(view, BASE, BASE + days * DAY, 4, "shop.example.com", visitors=True)))
    totals = expected_breakdown(events, view, "shop.example.com", BASE, BASE + days * DAY)
    assert answer.entries == sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
    assert answer.total_pageviews == sum(totals.values())
    assert answer.visitors is not None and answer.total_visitors is not None
    for (key, _), d in zip(answer.entries, answer.visitors, strict=True):
        assert d is not None
        assert_estimate(d, len(count(events, view, key, BASE, BASE + days * DAY)[1]))
    assert_estimate(
        answer.total_visitors, len(count(events, "site", "shop.example.com", BASE, BASE + days * DAY)[1])
    )


def test_timeseries_gives_pageviews_and_visitors_of_any_dimension_from_one_snapshot() -> None:
    logged = make_events(random.Random(11), 400)
    events = [x.event for x in logged]
    engine, _, _ = engine_for(logged, {0: 70, 1: 90})
    for view, key in (
        ("country", "shop.example.com|DE"),
        ("device", "shop.example.com|bot"),
        ("referrer", "shop.example.com|(internal)"),
    ):
        q = SeriesQuery(view, key, BASE + hours(3), BASE + 3 * DAY, Granularity.DAY)
        answer = run(engine.series(q))
        assert answer.pageviews == count(events, view, key, q.start, q.end)[0] > 0
        assert_estimate(answer.visitors, len(count(events, view, key, q.start, q.end)[1]))
        for point, b in zip(answer.series, buckets(q.start, q.end, q.granularity), strict=True):
            assert point.pageviews == count(events, view, key, b.start, b.end)[0]


def test_a_view_is_not_served_before_both_parts_count_it() -> None:
    from serving_layer.model import NotReady

    logged = make_events(random.Random(12), 200)
    engine, batch, realtime = engine_for(logged, {0: 50, 1: 50})
    q = SeriesQuery("country", "shop.example.com|DE", BASE, BASE + DAY, Granularity.DAY)
    run(engine.series(q))
    realtime.views[1] = frozenset(m for m in realtime.views[1] if not m.startswith("country@"))
    with pytest.raises(NotReady, match="'country' is not ready: the speed layer"):
        run(engine.series(q))
    del realtime.views[1]  # the speed layer has not counted generation 1 at all: batch alone is exact
    assert run(engine.series(q)).pageviews >= 0
    gen = batch.generations[1]
    day_map = {v: d for v, d in gen.day_map.items() if v != "country"}
    batch.generations[1] = type(gen)(gen.gen, gen.cut, gen.started_at, gen.served_at, day_map)
    with pytest.raises(NotReady, match="no batch views of it"):
        run(engine.series(q))


def test_a_malformed_stored_key_is_skipped_and_reported_never_an_error() -> None:
    logged = make_events(random.Random(13), 200)
    engine, batch, _ = engine_for(logged, {0: 50, 1: 50})
    bad: list[tuple[str, str]] = []
    engine.on_bad_key = lambda view, key: bad.append((view, key))
    day = BASE.strftime("%Y-%m-%d")
    batch.rankings[("page", 1, day)] = [("not a url", 10**6), *batch.rankings[("page", 1, day)]]
    batch.rankings[("country", 1, day)] = [("no-separator", 10**6), *batch.rankings[("country", 1, day)]]
    page = run(engine.top(TopQuery("page", BASE, BASE + DAY, 3, "shop.example.com", visitors=True)))
    country = run(engine.top(TopQuery("country", BASE, BASE + DAY, 3, "shop.example.com", visitors=True)))
    assert "not a url" not in dict(page.entries) and "no-separator" not in dict(country.entries)
    assert ("page", "not a url") in bad and ("country", "no-separator") in bad
    everything = run(engine.top(TopQuery("page", BASE, BASE + DAY, 3)))  # no site: the key is listed as is
    assert everything.entries[0] == ("not a url", 10**6)
