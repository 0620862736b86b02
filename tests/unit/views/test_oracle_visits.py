"""The reference sessioniser (tests/oracle_visits.py) on hand-written cases, each figured out by hand
from the definition of a visit."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings

from contract import PageView
from tests.oracle_visits import VisitBucket, compare_visits, sessionise, visit_recount
from tests.visit_strategies import VisitLog, page_view, visit_log_sets, visit_logs

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
A = "https://a.example.com"
B = "https://b.example.com"
GAP = timedelta(seconds=1800)
US = timedelta(microseconds=1)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def shape(events: list[PageView]) -> list[tuple[str, ...]]:
    """Each visit as the ids of its views."""
    return [tuple(e.event_id for e in v.views) for v in sessionise(events)]


def test_a_view_exactly_the_gap_after_the_previous_one_continues_the_visit() -> None:
    events = [page_view("a", T0, url=f"{A}/1"), page_view("b", T0 + GAP, url=f"{A}/2")]
    [visit] = sessionise(events)
    assert (visit.pageviews, visit.duration_ms, visit.bounced) == (2, 1_800_000, False)
    assert (visit.first.url, visit.last.url) == (f"{A}/1", f"{A}/2")


def test_one_microsecond_more_than_the_gap_starts_a_new_visit() -> None:
    events = [page_view("a", T0), page_view("b", T0 + GAP + US)]
    assert shape(events) == [("a",), ("b",)]
    recount = visit_recount(events)
    site = recount["site"][("a.example.com", "2026-03-01")]
    assert site.totals() == {"vi": 2, "bo": 2, "du": 0, "vv": 2}
    assert site.hours[10] == site.totals()  # 10:00 and 10:30:00.000001


def test_durations_are_whole_milliseconds_of_microsecond_times() -> None:
    events = [page_view("a", T0 + 999 * US), page_view("b", T0 + 2998 * US)]
    [visit] = sessionise(events)
    assert visit.duration_ms == 1  # (2998 - 999) // 1000, not 2 ms from 2.998 - 0.999 rounded


def test_a_visit_never_crosses_midnight() -> None:
    midnight = datetime(2026, 3, 2, tzinfo=UTC)
    events = [
        page_view("a", midnight - timedelta(seconds=60), url=f"{A}/late-night"),
        page_view("b", midnight - US, url=f"{A}/last-of-day"),
        page_view("c", midnight, url=f"{A}/first-of-day"),
        page_view("d", midnight + timedelta(seconds=60), url=f"{A}/next"),
    ]
    assert shape(events) == [("a", "b"), ("c", "d")]
    recount = visit_recount(events)
    assert recount["site"][("a.example.com", "2026-03-01")].totals() == {
        "vi": 1,
        "bo": 0,
        "du": 59_999,
        "vv": 2,
    }
    day2 = recount["site"][("a.example.com", "2026-03-02")]
    assert day2.totals() == {"vi": 1, "bo": 0, "du": 60_000, "vv": 2}
    assert day2.hours[0]["vi"] == 1
    assert set(recount["exit_page"]) == {(f"{A}/last-of-day", "2026-03-01"), (f"{A}/next", "2026-03-02")}


def test_ties_in_time_are_ordered_by_event_id_for_entry_and_exit() -> None:
    # Same time for all three: the string order of the ids decides, "e10" < "e2" < "e9".
    events = [
        page_view("e9", T0, url=f"{A}/nine", country="US"),
        page_view("e2", T0, url=f"{A}/two", country="FR"),
        page_view("e10", T0, url=f"{A}/ten", country="DE"),
    ]
    [visit] = sessionise(events)
    assert [e.event_id for e in visit.views] == ["e10", "e2", "e9"]
    recount = visit_recount(events)
    assert set(recount["entry_page"]) == {(f"{A}/ten", "2026-03-01")}
    assert set(recount["exit_page"]) == {(f"{A}/nine", "2026-03-01")}
    assert set(recount["country"]) == {("a.example.com|DE", "2026-03-01")}
    assert recount["site"][("a.example.com", "2026-03-01")].totals() == {"vi": 1, "bo": 0, "du": 0, "vv": 3}


def test_a_visitor_on_two_sites_has_a_visit_on_each() -> None:
    events = [
        page_view("a", at(0), url=f"{A}/"),
        page_view("b", at(60), url=f"{B}/"),
        page_view("c", at(120), url=f"{A}/x"),
    ]
    assert shape(events) == [("a", "c"), ("b",)]
    recount = visit_recount(events)
    assert recount["site"][("a.example.com", "2026-03-01")].totals() == {
        "vi": 1,
        "bo": 0,
        "du": 120_000,
        "vv": 2,
    }
    assert recount["site"][("b.example.com", "2026-03-01")].totals() == {"vi": 1, "bo": 1, "du": 0, "vv": 1}
    # entry and exit pages are keyed by the full URL, across sites
    assert set(recount["entry_page"]) == {(f"{A}/", "2026-03-01"), (f"{B}/", "2026-03-01")}
    assert set(recount["exit_page"]) == {(f"{A}/x", "2026-03-01"), (f"{B}/", "2026-03-01")}


def test_a_bounce_is_a_visit_of_one_view() -> None:
    ua = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)"
    events = [page_view("a", at(0), url=f"{A}/only", referrer="https://www.google.com/", user_agent=ua)]
    recount = visit_recount(events)
    one = {"vi": 1, "bo": 1, "du": 0, "vv": 1}
    for view, key in [
        ("site", "a.example.com"),
        ("referrer", "a.example.com|www.google.com"),
        ("country", "a.example.com|(unknown)"),
        ("device", "a.example.com|mobile"),
        ("entry_page", f"{A}/only"),
        ("exit_page", f"{A}/only"),
    ]:
        assert set(recount[view]) == {(key, "2026-03-01")}, view
        assert recount[view][(key, "2026-03-01")].totals() == one
        assert recount[view][(key, "2026-03-01")].hours[10] == one
    assert "page" not in recount


def test_a_late_view_merges_two_visits_into_one() -> None:
    first = page_view("a", at(0), url=f"{A}/in", referrer="https://www.google.com/")
    second = page_view("b", at(3600), url=f"{A}/out", referrer=f"{A}/in")
    before = visit_recount([first, second])
    assert before["site"][("a.example.com", "2026-03-01")].totals() == {"vi": 2, "bo": 2, "du": 0, "vv": 2}
    assert set(before["referrer"]) == {
        ("a.example.com|www.google.com", "2026-03-01"),
        ("a.example.com|(internal)", "2026-03-01"),
    }
    bridge = page_view("c", at(1800), url=f"{A}/mid")
    after = visit_recount([first, second, bridge])
    assert shape([first, second, bridge]) == [("a", "c", "b")]
    assert after["site"][("a.example.com", "2026-03-01")].totals() == {
        "vi": 1,
        "bo": 0,
        "du": 3_600_000,
        "vv": 3,
    }
    # the visit's referrer is its first view's: the internal one no longer starts a visit
    assert set(after["referrer"]) == {("a.example.com|www.google.com", "2026-03-01")}
    assert set(after["exit_page"]) == {(f"{A}/out", "2026-03-01")}


def test_a_late_view_before_a_visit_becomes_its_entry_and_moves_its_hour() -> None:
    events = [page_view("a", at(600), url=f"{A}/was-entry"), page_view("b", at(900), url=f"{A}/exit")]
    late = page_view("c", at(-1200), url=f"{A}/new-entry")  # 09:40, the hour before
    recount = visit_recount([*events, late])
    entry = recount["entry_page"][(f"{A}/new-entry", "2026-03-01")]
    assert entry.totals() == {"vi": 1, "bo": 0, "du": 2_100_000, "vv": 3}
    assert entry.hours[9]["vi"] == 1 and entry.hours[10]["vi"] == 0
    assert (f"{A}/was-entry", "2026-03-01") not in recount["entry_page"]


def test_duplicates_count_once() -> None:
    a, b = page_view("a", at(0)), page_view("b", at(10))
    assert visit_recount([a, b, a, b, a]) == visit_recount([a, b])


def test_out_of_order_arrival_gives_the_same_visits() -> None:
    rng = random.Random(27)
    events = [
        page_view(f"e{i}", at(s), visitor_id=v, url=f"{site}/{i % 3}")
        for i, (s, v, site) in enumerate(
            [(0, "v1", A), (1800, "v1", A), (3601, "v1", A), (3601, "v1", B), (10, "v2", A), (10, "v2", A)]
        )
    ]
    expected = visit_recount(events)
    for _ in range(20):
        shuffled = events[:]
        rng.shuffle(shuffled)
        assert visit_recount(shuffled) == expected
        assert sessionise(shuffled) == sessionise(events)


def test_compare_visits_reads_rows_and_names_each_difference() -> None:
    events = [page_view("a", at(0), url=f"{A}/1"), page_view("b", at(60), url=f"{A}/2")]
    expected = visit_recount(events)
    rows = []
    for view, buckets in expected.items():
        for (key, day), b in buckets.items():
            hours = [{"hour": h, "pv": 2, **b.hours[h]} for h in range(24) if b.hours[h]["vi"]]
            rows.append({"view": view, "key": key, "day": day, "pv": 0, **b.totals(), "hours": hours})
    rows.append({"view": "page", "key": f"{A}/1", "day": "2026-03-01", "pv": 1, "vi": None, "hours": []})
    assert compare_visits(expected, rows) == []
    # a referrer row with page views and no visits stored as zeros or nulls agrees with no bucket
    rows.append({"view": "referrer", "key": "a.example.com|x", "day": "2026-03-01", "vi": 0, "hours": []})
    assert compare_visits(expected, rows) == []
    rows[0] = {**rows[0], "du": 1}
    rows.append({"view": "page", "key": f"{A}/2", "day": "2026-03-01", "pv": 1, "vi": 3, "hours": []})
    problems = compare_visits(expected, rows)
    assert len(problems) == 2
    assert "du expected 60000 got 1" in problems[1] and "page" in problems[0]


def test_visit_bucket_adds_each_visit_at_its_first_hour() -> None:
    b = VisitBucket()
    for visit in sessionise([page_view("a", at(3000)), page_view("b", at(3700))]):
        b.add(visit)
    assert b.totals() == {"vi": 1, "bo": 0, "du": 700_000, "vv": 2}
    assert b.hours[10] == b.totals() and b.hours[11] == {"vi": 0, "bo": 0, "du": 0, "vv": 0}


@settings(max_examples=50, deadline=None)
@given(visit_logs())
def test_generated_logs_agree_with_themselves_in_any_order(log: VisitLog) -> None:
    """Arrival order, duplicates and a late view's position never change the visits; every view
    of the deduplicated log is in exactly one visit, and every visit stays within its gap and day."""
    visits = sessionise(log.events)
    assert sessionise(sorted(log.events, key=lambda e: (e.ts, e.event_id))) == visits
    assert sorted(e.event_id for v in visits for e in v.views) == sorted({e.event_id for e in log.events})
    for v in visits:
        assert len({e.ts.date() for e in v.views}) == 1
        assert all(b.ts - a.ts <= GAP for a, b in zip(v.views, v.views[1:], strict=False))
    recount = visit_recount(log.events)
    for view in ("site", "referrer", "country", "device", "channel", "utm_source", "entry_page", "exit_page"):
        assert sum(b.vi for b in recount[view].values()) == len(visits)
        assert sum(b.vv for b in recount[view].values()) == len({e.event_id for e in log.events})


@settings(max_examples=10, deadline=None)
@given(visit_log_sets())
def test_logs_merged_into_one_keep_their_visits_apart(log: VisitLog) -> None:
    visits = sessionise(log.events)
    assert all(len({e.visitor_id for e in v.views}) == 1 for v in visits)
