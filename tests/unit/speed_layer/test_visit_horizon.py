"""The visit state's horizon: which views may belong to a visit the state let go of, and what a
commit lets go of (speed_layer.visits.Horizon)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from speed_layer import outputs
from speed_layer.visits import FLAG_VIEW, Horizon, VisitProgress, state_sink
from stores.redis.visit_state import NEVER

GAP_S, LATE_S = 1800, 3600
US = 1_000_000


def test_a_fresh_state_flags_nothing_and_lets_go_of_nothing_before_a_watermark() -> None:
    fresh = Horizon(0, NEVER, LATE_S, GAP_S)
    assert fresh.late_before_us == NEVER and fresh.drop_before_us == NEVER
    # The first commit with a watermark lets go of what ended the lateness plus the gap behind it,
    # and views are flagged only from the micro-batch after it.
    first = Horizon(10_000_000, NEVER, LATE_S, GAP_S)
    assert first.late_before_us == NEVER
    assert first.drop_before_us == (10_000_000 - LATE_S * 1000) * 1000 - GAP_S * US
    after = Horizon(10_000_000, first.drop_before_us, LATE_S, GAP_S)
    assert after.late_before_us == (10_000_000 - LATE_S * 1000) * 1000


@given(
    st.integers(0, 10**12),
    st.one_of(st.just(NEVER), st.integers(-(10**15), 10**15)),
    st.integers(0, 10**6),
)
def test_what_was_let_go_of_is_never_within_a_gap_of_a_view_merged_exactly(
    watermark_ms: int, dropped: int, view_us: int
) -> None:
    """The cut-off never moves back, and a view at or after ``late_before_us`` is more than the gap
    after the end of every visit let go of (all ended before ``dropped_before_us``)."""
    h = Horizon(watermark_ms, dropped, LATE_S, GAP_S)
    assert h.drop_before_us >= dropped
    if h.late_before_us != NEVER:
        assert h.late_before_us - dropped >= GAP_S * US


def test_the_collected_rows_split_by_kind_and_the_progress_makes_the_sink() -> None:
    """The micro-batch's one collect holds rows of several kinds; they come out as typed fields
    (speed_layer.outputs.RealtimeRows), and the bookkeeping's sink is made from the flags and the
    driver's progress (none without progress: the batch carried no visits)."""
    rows = [
        {"gen": 3, "view": "site", "key": "s", "day": "2026-11-20", "aux": None},
        {"gen": 3, "view": FLAG_VIEW, "key": "s", "day": "2026-11-19", "aux": None},
    ]
    split = outputs.split(rows)
    assert split.views == rows[:1] and split.minutes == [] and split.filters is None
    assert split.visit_flags == [(3, "s", "2026-11-19")]
    assert state_sink(split.visit_flags, None) is None
    sink = state_sink(split.visit_flags, VisitProgress(99, -7))
    assert sink is not None and (sink.watermark_ms, sink.drop_before_us) == (99, -7)
