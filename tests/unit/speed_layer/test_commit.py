"""The speed layer's exactly-once bookkeeping and its progress parsing, without services."""

from __future__ import annotations

import time

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from generations.model import SpeedCommit
from speed_layer import commit
from speed_layer.commit import RealtimeStateLost, already_committed
from speed_layer.progress import lag_of

offsets = st.dictionaries(st.integers(0, 7), st.integers(0, 10**9), min_size=1, max_size=8)


@given(committed=st.integers(-1, 1000), batch=st.integers(0, 1000), ends=offsets)
def test_a_batch_is_processed_once_and_a_hole_is_never_counted_over(
    committed: int, batch: int, ends: dict[int, int]
) -> None:
    stored = SpeedCommit(committed, ends if committed >= 0 else {})
    if committed >= batch:
        assert already_committed(stored, batch, ends)  # a replay: skipped
    elif batch == 0 or (committed == batch - 1 and committed >= 0):
        assert not already_committed(stored, batch, ends)  # the next batch: processed
    else:
        with pytest.raises(RealtimeStateLost, match="rebuild-realtime"):
            already_committed(stored, batch, ends)


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


class FlakyRedis:
    """Unreachable for ``down_s`` seconds from its first call, then answering."""

    def __init__(self, down_s: float) -> None:
        self.down_s = down_s
        self.first: float | None = None

    def get(self) -> str:
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        if now - self.first < self.down_s:
            raise redis.ConnectionError("connection refused")
        return "answer"


def test_each_redis_outage_has_a_clock_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two outages of 0.6 of the limit each, with an answer in between, are both waited through:
    the clock starts again after Redis answered."""
    monkeypatch.setattr(commit, "REDIS_RETRY_S", 0.5)
    monkeypatch.setattr(commit, "REDIS_RETRY_WAIT_S", 0.02)
    assert commit.redis_call(FlakyRedis(0.3).get) == "answer"
    assert commit.redis_call(FlakyRedis(0.3).get) == "answer"


def test_an_outage_longer_than_the_limit_fails_with_the_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit, "REDIS_RETRY_S", 0.2)
    monkeypatch.setattr(commit, "REDIS_RETRY_WAIT_S", 0.02)
    with pytest.raises(RuntimeError, match="Redis unreachable for 0 s: connection refused"):
        commit.redis_call(FlakyRedis(5.0).get)
