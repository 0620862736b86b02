"""The stores' oracle suite, written once and run against every backend, both halves.

Every case writes a log's views through a tests.serving_support.ServingBackend (its MemoryBackend
on stores.memory, tests.integration.serving_fixtures' StoreBackend on MongoDB and Redis), with
the backend's batch writer and realtime sink, and checks what its readers give back and the query
engine's merged answers against a recount of the events (tests.oracle). A backend's test
module collects the cases by subclassing :class:`ServingOracle` as ``Test...`` and providing a
``backend`` fixture (module- or session-scoped: the hypothesis cases draw many examples from one
backend, each on a generation of its own).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import PageView
from serving_layer import (
    BatchUnavailable,
    ConsistencyTimeout,
    Granularity,
    PageviewsAnswer,
    QueryEngine,
    ReadAfter,
    SeriesAnswer,
    SeriesQuery,
    TopQuery,
)
from serving_layer.model import BatchDoc, DayRead, Measure, NotReady, RankRead, SpeedCommit
from serving_layer.tiling import DAY, buckets
from stores import realtime_hash
from stores.batch_views import BatchReader
from stores.realtime_views import RealtimeReader
from tests.oracle import DIMENSION_KEYS, dedup
from tests.serving_support import Logged, ServingBackend, assert_estimate, count, generation_views
from views.sketches import estimate

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


def share_of(logged: Sequence[Logged], share: float) -> dict[int, int]:
    """A cut at ``share`` of each partition."""
    return {p: int(share * sum(x.partition == p for x in logged)) for p in (0, 1)}


async def assert_series_equal_the_recount(
    engine: QueryEngine, events: Sequence[PageView], q: SeriesQuery, *, bucket_visitors: bool = True
) -> PageviewsAnswer:
    """Page views (total and per bucket) exactly, unique visitors within their stated error (per
    bucket too unless told not to); returns the page views' answer."""
    view, key, start, end = q.view, q.key, q.start, q.end
    pv = await engine.pageviews(q)
    assert pv.total == count(events, view, key, start, end)[0], (view, key, start, end)
    assert [p.pageviews for p in pv.series] == [
        count(events, view, key, b.start, b.end)[0] for b in buckets(start, end, q.granularity)
    ]
    assert not pv.coverage.partial
    uv = await engine.unique_visitors(q)
    assert_estimate(uv.total, len(count(events, view, key, start, end)[1]))
    if bucket_visitors:
        for (_, d), b in zip(uv.series, buckets(start, end, q.granularity), strict=True):
            assert_estimate(d, len(count(events, view, key, b.start, b.end)[1]))
    return pv


def expected_breakdown(
    events: Sequence[PageView], view: str, site: str | None, start: datetime, end: datetime
) -> dict[str, int]:
    totals: dict[str, int] = {}
    for e in dedup(events):
        key = DIMENSION_KEYS[view](e)
        if start <= e.ts < end and (
            site is None or key.startswith(f"{site}|") or key.startswith(f"https://{site}/")
        ):
            totals[key] = totals.get(key, 0) + 1
    return totals


ONE_SUITE_MANY_BACKENDS = [HealthCheck.differing_executors]
"""The property tests are methods of the one suite, run by a subclass per backend: hypothesis sees
one test called from several classes. Each run depends only on its own ``backend`` fixture, so the
examples are valid for every backend. Example counts are sized for the real stores, where one
example (writing its views to FerretDB and Redis) takes 1-2 s: 16 and 10 per backend keep
``make test`` within its 20-minute budget on 2 cores, and every example is checked against the
recount on both backends."""


class ServingOracle:
    """The cases; a subclass named ``Test...`` with a ``backend`` fixture runs them."""

    @settings(max_examples=16, deadline=None, suppress_health_check=ONE_SUITE_MANY_BACKENDS)
    @given(
        seed=st.integers(0, 10_000),
        cut_share=st.floats(0, 1),
        start_h=st.integers(0, 24 * 4),
        span_h=st.integers(1, 24 * 4),
        granularity=st.sampled_from(list(Granularity)),
        site=st.booleans(),
    )
    def test_merged_answers_equal_the_recount_wherever_the_cut_lies(
        self,
        backend: ServingBackend,
        seed: int,
        cut_share: float,
        start_h: int,
        span_h: int,
        granularity: Granularity,
        site: bool,
    ) -> None:
        rng = random.Random(seed)
        logged = make_events(rng, 300)
        backend.load(share_of(logged, cut_share), logged)
        view, key = ("site", "shop.example.com") if site else ("page", rng.choice(URLS))
        q = SeriesQuery(view, key, BASE + hours(start_h), BASE + hours(start_h + span_h), granularity)
        events = [x.event for x in logged]
        backend.query(lambda engine: assert_series_equal_the_recount(engine, events, q))

    def test_unique_visitors_are_exact_only_from_batch_buckets_alone(self, backend: ServingBackend) -> None:
        logged = make_events(random.Random(1), 400)
        events = [x.event for x in logged]
        backend.load({p: 10**6 for p in (0, 1)}, logged)
        day = SeriesQuery("page", URLS[0], BASE, BASE + DAY, Granularity.DAY)
        uv = backend.query(lambda e: e.unique_visitors(day))
        assert uv.total.exact
        assert uv.total.estimate == len(count(events, "page", URLS[0], BASE, BASE + DAY)[1])
        two_days = SeriesQuery("page", URLS[0], BASE, BASE + 2 * DAY, Granularity.DAY)
        uv2 = backend.query(lambda e: e.unique_visitors(two_days))
        assert (
            all(d.exact for _, d in uv2.series) and not uv2.total.exact
        )  # a union of two days is an estimate

        backend.load({0: 0, 1: 0}, logged)  # everything realtime
        assert not backend.query(lambda e: e.unique_visitors(day)).total.exact

    def test_top_merges_batch_rankings_with_realtime(self, backend: ServingBackend) -> None:
        logged = make_events(random.Random(2), 500)
        events = [x.event for x in logged]
        backend.load({0: 120, 1: 100}, logged)
        q = TopQuery("page", BASE + hours(5), BASE + 2 * DAY + hours(3), limit=3)
        answer = backend.query(lambda e: e.top(q))
        assert (answer.start, answer.end) == (BASE, BASE + 3 * DAY)  # rounded outwards to whole days
        totals = {u: count(events, "page", u, BASE, BASE + 3 * DAY)[0] for u in URLS}
        expected = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        assert answer.entries == expected
        blog = backend.query(
            lambda e: e.top(TopQuery("page", BASE, BASE + DAY, limit=5, site="blog.example.com"))
        )
        assert [k for k, _ in blog.entries] == ["https://blog.example.com/"]

    def test_redis_down_gives_a_flagged_batch_only_answer_and_mongo_down_no_answer(
        self, backend: ServingBackend
    ) -> None:
        logged = make_events(random.Random(3), 300)
        cut = {0: 80, 1: 80}
        backend.load(cut, logged)
        q = SeriesQuery("page", URLS[1], BASE, BASE + 4 * DAY, Granularity.DAY)
        answer = backend.query(lambda e: e.pageviews(q), realtime_down=True)
        below = [x.event for x in logged if x.offset < cut[x.partition]]
        assert answer.coverage.partial and answer.coverage.missing == ("realtime",)
        assert answer.coverage.batch_offsets == cut and answer.coverage.realtime_offsets is None
        assert answer.total == count(below, "page", URLS[1], BASE, BASE + 4 * DAY)[0]
        with pytest.raises(BatchUnavailable):
            backend.query(lambda e: e.pageviews(q), batch_down=True, realtime_down=True)

    def test_read_after_waits_for_the_commit_or_times_out(self, backend: ServingBackend) -> None:
        logged = make_events(random.Random(4), 100)
        backend.load({0: 10, 1: 10}, logged)
        q = SeriesQuery("page", URLS[0], BASE, BASE + DAY, Granularity.HOUR)
        end = backend.commit().offsets
        committed = [x.event for x in logged if x.offset < end.get(x.partition, 0)]
        expected = count(committed, "page", URLS[0], BASE, BASE + DAY)[0]
        assert expected > 0
        assert backend.query(lambda e: e.pageviews(q, ReadAfter(end, 0.0))).total == expected
        beyond = {0: end[0] + 5}
        with pytest.raises(ConsistencyTimeout) as err:
            backend.query(lambda e: e.pageviews(q, ReadAfter(beyond, 0.02)))
        assert err.value.pending == beyond

        async def commit_later(engine: QueryEngine) -> int:
            async def advance() -> None:
                await asyncio.sleep(0.01)
                backend.set_commit(SpeedCommit(1, {**end, 0: end[0] + 5}))

            task = asyncio.create_task(advance())
            answer = await engine.pageviews(q, ReadAfter(beyond, 1.0))
            await task
            return answer.total

        assert backend.query(commit_later) == expected  # the wait ended with the later commit

    def test_a_generation_switch_is_read_from_one_snapshot(self, backend: ServingBackend) -> None:
        """Whichever generation the snapshot names, batch and realtime come from it: same totals."""
        logged = make_events(random.Random(5), 400)
        events = [x.event for x in logged]
        backend.load({0: 50, 1: 50}, logged)
        q = SeriesQuery("site", "shop.example.com", BASE, BASE + 4 * DAY, Granularity.DAY)
        before = backend.query(lambda e: e.pageviews(q)).total
        gen = backend.load({0: 150, 1: 150}, logged)  # the next generation published, realtime rebuilt
        after = backend.query(lambda e: e.pageviews(q))
        assert after.coverage.generation == gen
        assert before == after.total == count(events, "site", "shop.example.com", BASE, BASE + 4 * DAY)[0]

    # --- every dimension through the generic path ------------------------------------------------
    @settings(max_examples=10, deadline=None, suppress_health_check=ONE_SUITE_MANY_BACKENDS)
    @given(
        seed=st.integers(0, 10_000),
        cut_share=st.floats(0, 1),
        view=st.sampled_from(["page", "referrer", "country", "device"]),
        days=st.integers(1, 4),
    )
    def test_breakdowns_of_every_dimension_equal_the_recount(
        self, backend: ServingBackend, seed: int, cut_share: float, view: str, days: int
    ) -> None:
        rng = random.Random(seed)
        logged = make_events(rng, 300)
        backend.load(share_of(logged, cut_share), logged)
        events = [x.event for x in logged]
        q = TopQuery(view, BASE, BASE + days * DAY, 4, "shop.example.com", visitors=True)
        answer = backend.query(lambda e: e.top(q))
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

    def test_timeseries_gives_pageviews_and_visitors_of_any_dimension_from_one_snapshot(
        self, backend: ServingBackend
    ) -> None:
        logged = make_events(random.Random(11), 400)
        events = [x.event for x in logged]
        backend.load({0: 70, 1: 90}, logged)
        queries = [
            SeriesQuery(view, key, BASE + hours(3), BASE + 3 * DAY, Granularity.DAY)
            for view, key in (
                ("country", "shop.example.com|DE"),
                ("device", "shop.example.com|bot"),
                ("referrer", "shop.example.com|(internal)"),
            )
        ]

        async def answers(engine: QueryEngine) -> list[SeriesAnswer]:
            return [await engine.series(q) for q in queries]

        for q, answer in zip(queries, backend.query(answers), strict=True):
            view, key = q.view, q.key
            assert answer.pageviews == count(events, view, key, q.start, q.end)[0] > 0
            assert_estimate(answer.visitors, len(count(events, view, key, q.start, q.end)[1]))
            for point, b in zip(answer.series, buckets(q.start, q.end, q.granularity), strict=True):
                assert point.pageviews == count(events, view, key, b.start, b.end)[0]

    def test_a_view_is_not_served_before_both_parts_count_it(self, backend: ServingBackend) -> None:
        logged = make_events(random.Random(12), 200)
        gen = backend.load({0: 50, 1: 50}, logged)
        q = SeriesQuery("country", "shop.example.com|DE", BASE, BASE + DAY, Granularity.DAY)
        backend.query(lambda e: e.series(q))
        backend.forget_counted_view(gen, "country")
        with pytest.raises(NotReady, match="'country' is not ready: the speed layer"):
            backend.query(lambda e: e.series(q))
        # No record at all of the views the speed layer counts (as before the records existed): both
        # parts are served, and the answer is exact.
        backend.forget_counted_view(gen, None)
        everything = count([x.event for x in logged], "country", "shop.example.com|DE", BASE, BASE + DAY)[0]
        assert backend.query(lambda e: e.series(q)).pageviews == everything > 0
        backend.forget_batch_view(gen, "country")
        with pytest.raises(NotReady, match="no batch views of it"):
            backend.query(lambda e: e.series(q))

    def test_a_malformed_stored_key_is_skipped_and_reported_never_an_error(
        self, backend: ServingBackend
    ) -> None:
        logged = make_events(random.Random(13), 200)
        gen = backend.load({0: 50, 1: 50}, logged)
        day = BASE.strftime("%Y-%m-%d")
        backend.add_to_ranking("page", gen, day, "not a url", 10**6)
        backend.add_to_ranking("country", gen, day, "no-separator", 10**6)
        bad: list[tuple[str, str]] = []

        async def page_and_country(engine: QueryEngine) -> tuple[dict[str, int], dict[str, int]]:
            engine.on_bad_key = lambda view, key: bad.append((view, key))
            page = await engine.top(TopQuery("page", BASE, BASE + DAY, 3, "shop.example.com", visitors=True))
            country = await engine.top(
                TopQuery("country", BASE, BASE + DAY, 3, "shop.example.com", visitors=True)
            )
            return dict(page.entries), dict(country.entries)

        page, country = backend.query(page_and_country)
        assert "not a url" not in page and "no-separator" not in country
        assert ("page", "not a url") in bad and ("country", "no-separator") in bad
        everything = backend.query(
            lambda e: e.top(TopQuery("page", BASE, BASE + DAY, 3))
        )  # no site: listed as is
        assert everything.entries[0] == ("not a url", 10**6)

    def test_the_read_halves_give_back_what_the_write_halves_stored(self, backend: ServingBackend) -> None:
        """Every batch document, ranking, realtime hash and realtime ranking of a generation, written
        through the backend's writer and sink, read back through its readers: page views exactly,
        sketches as the same distinct counts."""
        logged = make_events(random.Random(17), 400)
        cut = share_of(logged, 0.5)
        gen = backend.load(cut, logged)
        views = generation_views(gen, cut, logged)
        every_cell = tuple((m, h) for m in (Measure.PAGEVIEWS, Measure.VISITORS) for h in (None, *range(24)))
        day_reads = [DayRead(view, key, day, every_cell) for view, key, day in views.hashes]
        rank_reads = [RankRead(view, day) for view, day in views.ranks]

        async def read_back(batch: BatchReader, realtime: RealtimeReader) -> tuple[Any, ...]:
            generation = await batch.generation(gen)
            docs: dict[tuple[str, str, str], BatchDoc | None] = {}
            for view in {view for view, _, _ in views.docs}:
                wanted = [(key, day) for v, key, day in views.docs if v == view]
                got = await batch.documents(view, [(gen, k, d) for k, d in wanted], [True] * len(wanted))
                docs.update({(view, k, d): doc for (k, d), doc in zip(wanted, got, strict=True)})
            rankings = {(view, day): await batch.ranking(view, gen, day) for view, day in views.rankings}
            return generation, docs, rankings, await realtime.snapshot(day_reads, rank_reads)

        generation, docs, rankings, snapshot = backend.read_back(read_back)
        assert (generation.cut, generation.day_map) == (views.info.cut, views.info.day_map)
        assert docs == views.docs
        assert rankings == views.rankings
        assert snapshot.served is not None and snapshot.served.gen == gen
        for read, got in zip(day_reads, snapshot.days, strict=True):
            stored = views.hashes[(read.view, read.key, read.day)]
            fields = realtime_hash.fields_of(read.cells)
            expected = realtime_hash.decode(read.cells, [stored.get(f) for f in fields])
            assert (got.pv, got.h_pv) == (expected.pv, expected.h_pv), read
            got_sketches, expected_sketches = (got.sk, *got.h_sk), (expected.sk, *expected.h_sk)
            assert [s is None for s in got_sketches] == [s is None for s in expected_sketches], read
            for a, b in zip(got_sketches, expected_sketches, strict=True):
                if b is not None:
                    assert a is not None and estimate([a]) == estimate([b]), read
        for rank, entries in zip(rank_reads, snapshot.ranks, strict=True):
            assert dict(entries) == views.ranks[(rank.view, rank.day)], rank
