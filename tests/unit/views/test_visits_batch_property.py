"""Batch = reference: the visit metrics of ``views.compute`` over generated logs equal those of the
pure-Python sessioniser (tests/oracle_visits.py) for every (view, key, day) and every hour.

Each example is one Spark run over a few generated logs at once (tests/visit_strategies.py: late
views that merge visits, ties, midnight, duplicates, visitors on two sites), deduplicated first as
both layers do before the pass. The hand-written cases of test_oracle_visits.py run too, in one
run, and each on its own after a failure, so that the failure reads as the case it is.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.settings import get_settings
from contract import PageView
from tests.oracle import dedup, recount
from tests.oracle_visits import compare_visits, describe, sessionise, visit_recount
from tests.visit_strategies import MIDNIGHT, VisitLog, page_view, visit_log_sets
from views import all_views, compute

A = "https://a.example.com"
B = "https://b.example.com"
GAP_S = get_settings().session_gap_s
"""The gap both the pass and the reference use (LAMBDA_SESSION_GAP_S, 1800 s by default)."""
GAP = timedelta(seconds=GAP_S)
US = timedelta(microseconds=1)
T0 = MIDNIGHT - timedelta(hours=1)


def _log(*events: PageView) -> VisitLog:
    return VisitLog(tuple(events), frozenset())


HAND_WRITTEN = {
    "gap exactly (one visit) and one microsecond more (two)": _log(
        page_view("a", T0, url=f"{A}/1"),
        page_view("b", T0 + GAP, url=f"{A}/2"),
        page_view("c", T0, visitor_id="v2", url=f"{A}/1"),
        page_view("d", T0 + GAP + US, visitor_id="v2", url=f"{A}/2"),
    ),
    "midnight splits a visit": _log(
        page_view("a", MIDNIGHT - US, url=f"{A}/before"),
        page_view("b", MIDNIGHT, url=f"{A}/after"),
        page_view("c", MIDNIGHT + timedelta(seconds=1), url=f"{A}/after2"),
    ),
    "ties ordered by event id": _log(
        page_view("e9", T0, url=f"{A}/nine", country="US"),
        page_view("e2", T0, url=f"{A}/two", country="FR"),
        page_view("e10", T0, url=f"{A}/ten", country="DE"),
    ),
    "a visitor on two sites, a bounce on one": _log(
        page_view("a", T0, url=f"{A}/"),
        page_view("b", T0 + timedelta(seconds=60), url=f"{B}/"),
        page_view("c", T0 + timedelta(seconds=120), url=f"{A}/x", referrer=f"{A}/"),
    ),
    "a late view merges two visits": _log(
        page_view("a", T0, url=f"{A}/in", referrer="https://www.google.com/"),
        page_view("b", T0 + 2 * GAP, url=f"{A}/out", referrer=f"{A}/in"),
        page_view("c", T0 + GAP, url=f"{A}/mid"),
    ),
    "sub-millisecond duration": _log(
        page_view("a", T0 + 999 * US),
        page_view("b", T0 + 2998 * US),
    ),
}


def _dataframe(spark: Any, events: list[PageView]) -> Any:
    rows = [(e.event_id, e.ts, e.visitor_id, e.url, e.referrer, e.user_agent, e.country) for e in events]
    return spark.createDataFrame(
        rows,
        "event_id string, ts timestamp, visitor_id string, url string, referrer string, "
        "user_agent string, country string",
    )


def _page_view_problems(events: list[PageView], rows: list[Any]) -> list[str]:
    """The page views and visitors of the page-view views still equal the recount's."""
    expected = recount(events)
    problems = []
    for view, buckets in expected.items():
        got = {(r["key"], r["day"]): (r["pv"], r["uv"]) for r in rows if r["view"] == view}
        want = {ident: (b.pv, len(b.visitors)) for ident, b in buckets.items()}
        if got != want:
            problems.append(f"{view}: pv/uv {got} != recount {want}")
    return problems


def _check(spark: Any, log: VisitLog, single_partition: bool) -> None:
    events = dedup(log.events)
    rows = compute(_dataframe(spark, events), all_views(), 12, single_partition=single_partition).collect()
    problems = compare_visits(visit_recount(events, GAP_S), rows) + _page_view_problems(events, rows)
    assert not problems, (
        f"{len(problems)} differences (single_partition={single_partition}):\n"
        + "\n".join(problems[:40])
        + f"\n\nlog:\n{log}\n\nreference visits:\n{describe(sessionise(events, GAP_S))}"
    )


def test_every_view_carries_the_visit_metrics() -> None:
    assert {"entry_page", "exit_page"} <= {v.name for v in all_views()}


@settings(
    max_examples=5,  # 1-2 s of Spark each on an idle machine
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(log=visit_log_sets(gap_us=GAP_S * 1_000_000), single_partition=st.booleans())
def test_batch_visits_equal_the_reference(spark: Any, log: VisitLog, single_partition: bool) -> None:
    _check(spark, log, single_partition)


def test_hand_written_cases_equal_the_reference(spark: Any) -> None:
    """All the cases in one run, each with its own visitors; on a failure, each case alone names
    the ones that fail."""
    events = [
        e.model_copy(update={"visitor_id": f"{e.visitor_id}-{i}", "event_id": f"{e.event_id}-{i}"})
        for i, log in enumerate(HAND_WRITTEN.values())
        for e in log.events
    ]
    try:
        _check(spark, _log(*events), single_partition=False)
    except AssertionError:
        for name, log in HAND_WRITTEN.items():
            try:
                _check(spark, log, single_partition=False)
            except AssertionError as exc:
                raise AssertionError(f"case {name!r}: {exc}") from None
        raise
