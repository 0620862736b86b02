"""Weeks, months and comparison ranges: ISO weeks start on Monday, months on the 1st, both built
from whole UTC days (hours only where the range cuts a day), and a comparison range is the period
just before or the same calendar range a year earlier."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving_layer import Granularity, InvalidQuery
from serving_layer.comparison import Compare, comparison_range, percent_change, year_earlier
from serving_layer.queries import EARLIEST
from serving_layer.tiling import DAY, HOUR, buckets, floor_week, next_month, period_end

HOURS_FROM = datetime(2023, 12, 1, tzinfo=UTC)
ranges = st.tuples(st.integers(0, 24 * 800), st.integers(1, 24 * 92)).map(
    lambda t: (HOURS_FROM + timedelta(hours=t[0]), HOURS_FROM + timedelta(hours=t[0] + t[1]))
)
"""Ranges of whole hours up to 92 days, over two and a half years (a leap day, year ends)."""


def period_of(t: datetime, granularity: Granularity) -> tuple[int, int]:
    """The ISO week (year, week) or the (year, month) ``t`` lies in."""
    if granularity is Granularity.WEEK:
        iso = t.isocalendar()
        return iso.year, iso.week
    return t.year, t.month


@given(ranges, st.sampled_from([Granularity.WEEK, Granularity.MONTH]))
def test_week_and_month_buckets_are_calendar_periods_cut_to_the_range(
    rng: tuple[datetime, datetime], granularity: Granularity
) -> None:
    start, end = rng
    bs = buckets(start, end, granularity)
    assert bs[0].start == start and bs[-1].end == end
    for a, b in itertools.pairwise(bs):
        assert a.end == b.start
        # every boundary inside the range is a period's start: Monday 00:00 or the 1st, 00:00
        assert b.start.hour == 0 and (
            b.start.weekday() == 0 if granularity is Granularity.WEEK else b.start.day == 1
        )
    hours = [start + HOUR * i for i in range(int((end - start) / HOUR))]
    assert len(bs) == len({period_of(t, granularity) for t in hours})
    for b in bs:
        assert period_of(b.start, granularity) == period_of(b.end - HOUR, granularity)
        # built from the stored buckets: whole days, hours only in a day the range cuts
        assert sum((t.length for t in b.tiles), timedelta()) == b.end - b.start
        assert sum(t.hour is not None for t in b.tiles) <= 46


@given(st.integers(0, 24 * 4000).map(lambda h: HOURS_FROM + timedelta(hours=h)))
def test_period_ends(t: datetime) -> None:
    week = floor_week(t)
    assert week.weekday() == 0 and week <= t < week + 7 * DAY and week.hour == 0
    assert period_end(t, Granularity.WEEK) == week + 7 * DAY
    month_end = next_month(t)
    assert month_end.day == 1 and month_end > t and month_end - t <= 31 * DAY
    assert (month_end - DAY).month == t.month
    assert period_end(t, Granularity.DAY) - t <= DAY and period_end(t, Granularity.HOUR) == t + HOUR


def test_a_month_of_days_a_year_end_and_a_leap_february() -> None:
    feb = buckets(datetime(2024, 1, 31, tzinfo=UTC), datetime(2024, 3, 2, tzinfo=UTC), Granularity.MONTH)
    assert [(b.start.date().isoformat(), b.end.date().isoformat(), len(b.tiles)) for b in feb] == [
        ("2024-01-31", "2024-02-01", 1),
        ("2024-02-01", "2024-03-01", 29),
        ("2024-03-01", "2024-03-02", 1),
    ]
    # 2026-12-31 is a Thursday: its ISO week runs Monday 28 December to Monday 4 January
    weeks = buckets(datetime(2026, 12, 24, tzinfo=UTC), datetime(2027, 1, 6, tzinfo=UTC), Granularity.WEEK)
    assert [b.start.date().isoformat() for b in weeks] == ["2026-12-24", "2026-12-28", "2027-01-04"]


@given(ranges)
def test_the_previous_period_is_as_long_and_ends_where_the_range_starts(
    rng: tuple[datetime, datetime],
) -> None:
    start, end = rng
    assert comparison_range(start, end, Compare.PREVIOUS_PERIOD) == (start - (end - start), start)


@given(ranges)
def test_a_year_earlier_is_the_same_calendar_range(rng: tuple[datetime, datetime]) -> None:
    start, end = rng
    s, e = comparison_range(start, end, Compare.YEAR_OVER_YEAR)
    for moved, t in ((s, start), (e, end)):
        assert moved.year == t.year - 1 and moved.hour == t.hour
        assert (moved.month, moved.day) == ((2, 28) if (t.month, t.day) == (2, 29) else (t.month, t.day))
    assert s < e and abs((e - s) - (end - start)) <= DAY


def test_a_comparison_before_the_earliest_time_names_compare() -> None:
    with pytest.raises(InvalidQuery, match="compare: the previous period"):
        comparison_range(EARLIEST + HOUR, EARLIEST + 3 * HOUR, Compare.PREVIOUS_PERIOD)
    with pytest.raises(InvalidQuery, match="compare: a year earlier"):
        comparison_range(EARLIEST, EARLIEST + DAY, Compare.YEAR_OVER_YEAR)
    assert year_earlier(datetime(2024, 2, 29, 5, tzinfo=UTC)) == datetime(2023, 2, 28, 5, tzinfo=UTC)


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_the_change_is_in_percent_of_the_base_and_null_from_zero(value: int, base: int) -> None:
    got = percent_change(value, base)
    if base == 0:
        assert got is None
    else:
        # round() to 0.01 is off by at most half of it, plus the float error of a value like
        # 1595.625, which is not exactly representable
        assert got is not None and abs(got - (value - base) / base * 100) <= 0.005 + 1e-9
        assert (got > 0) == (value > base) or got == 0
    assert percent_change(None, base) is None and percent_change(value, None) is None
