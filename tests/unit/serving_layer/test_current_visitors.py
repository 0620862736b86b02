"""The current visitors' window and arithmetic (serving_layer.current_visitors), against a recount
of generated visits: the window always holds the last minutes asked for, and the union of the
minutes is the recount, exactly while every minute kept its set, within the sketch's bounds after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from datasketches import hll_sketch
from hypothesis import given, settings
from hypothesis import strategies as st

from serving_layer.current_visitors import covers, distinct, window
from stores.redis.current_visitors import EPOCH, Minute, expires_at, minute_text

instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
)


@given(instants, st.integers(1, 60))
def test_the_window_holds_the_last_minutes_and_at_most_one_more(now: datetime, minutes: int) -> None:
    w = window(now, minutes)
    assert w.start <= now - timedelta(minutes=minutes) and now < w.end
    assert w.end - w.start == timedelta(minutes=minutes + 1)
    assert w.start.second == w.start.microsecond == 0
    assert [EPOCH + timedelta(minutes=m) for m in (w.minutes[0], w.minutes[-1])] == [
        w.start,
        w.end - timedelta(minutes=1),
    ]
    # The window's oldest minute is still stored when the window ends (its keys expire later).
    assert expires_at(w.minutes[0], minutes) > w.end.timestamp()


def sketch_of(visitors: set[str]) -> bytes:
    s = hll_sketch(12)
    for v in visitors:
        s.update(v)
    return bytes(s.serialize_compact())


visitor_sets = st.sets(st.sampled_from([f"v{i}" for i in range(300)]), max_size=150)
visits = st.lists(visitor_sets, min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(visits, st.integers(0, 200))
def test_the_union_of_the_minutes_is_the_recount(minutes: list[set[str]], limit: int) -> None:
    """Each minute keeps its set up to ``limit`` visitors (as the sink does); the answer is exact
    exactly when every minute kept it, and the recount lies within its bounds either way."""
    read = [
        Minute(sketch_of(m), frozenset(v.encode() for v in m) if len(m) <= limit else None) if m else Minute()
        for m in minutes
    ]
    got = distinct(read)
    expected = len(set().union(*minutes))
    assert got.exact == all(len(m) <= limit for m in minutes)
    if got.exact:
        assert got.estimate == got.lower == got.upper == expected
    else:
        assert got.lower <= expected <= got.upper


offsets = st.dictionaries(st.integers(0, 3), st.integers(0, 100))


@given(offsets, offsets)
def test_a_commit_covers_a_time_when_it_includes_every_record_before_it(
    commit: dict[int, int], before: dict[int, int]
) -> None:
    assert covers(commit, before) == all(commit.get(p, 0) >= o for p, o in before.items())
    assert covers({p: o + 1 for p, o in before.items()}, before)


def test_minute_keys_are_spelled_as_utc_minutes() -> None:
    minute = int(datetime(2026, 11, 26, 12, 31, tzinfo=UTC).timestamp() // 60)
    assert minute_text(minute) == "2026-11-26T12:31"
