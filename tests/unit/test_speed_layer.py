"""The speed layer's exactly-once bookkeeping and its progress parsing, without services."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generations.keys import SpeedCommit
from speed_layer.job import RealtimeStateLost, already_committed, lag_of

offsets = st.dictionaries(st.integers(0, 7), st.integers(0, 10**9), min_size=1, max_size=8)


@given(committed=st.integers(-1, 1000), batch=st.integers(0, 1000), ends=offsets)
def test_a_batch_is_processed_once_and_a_hole_is_never_counted_over(
    committed: int, batch: int, ends: dict[int, int]
) -> None:
    commit = SpeedCommit(committed, ends if committed >= 0 else {})
    if committed >= batch:
        assert already_committed(commit, batch, ends)  # a replay: skipped
    elif batch == 0 or (committed == batch - 1 and committed >= 0):
        assert not already_committed(commit, batch, ends)  # the next batch: processed
    else:
        with pytest.raises(RealtimeStateLost, match="rebuild-realtime"):
            already_committed(commit, batch, ends)


def test_offsets_that_do_not_match_the_checkpoint_mean_lost_writes() -> None:
    with pytest.raises(RealtimeStateLost):
        already_committed(SpeedCommit(4, {0: 10}), 5, {0: 12})


def test_lag_is_read_from_progress_in_any_of_sparks_shapes() -> None:
    progress = {
        "sources": [
            {"latestOffset": '{"events":{"0":120,"1":80}}', "endOffset": {"events": {"0": 100, "1": 80}}},
        ]
    }
    assert lag_of(progress) == {0: 20, 1: 0}
    assert lag_of({"sources": [{"latestOffset": "", "endOffset": None}]}) == {}
