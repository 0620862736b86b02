"""Caches bounded in bytes: what a caller asks never grows a process past the setting."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import pytest

from config import memo
from config.settings import Settings
from serving_layer.tiling import Granularity, buckets


def test_deep_size_counts_what_a_value_holds_once() -> None:
    s = "x" * 1000
    assert memo.deep_size(s) == sys.getsizeof(s)
    assert memo.deep_size((s, s)) == sys.getsizeof((s, s)) + sys.getsizeof(s)
    assert memo.deep_size({"a": [1.5]}) > sys.getsizeof({"a": [1.5]}) + sys.getsizeof([1.5])


def test_a_long_sequence_is_sized_from_a_sample_near_its_whole_size(monkeypatch: pytest.MonkeyPatch) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    value = buckets.fn(start, start + timedelta(days=92), Granularity.HOUR)
    sampled = memo.deep_size(value)
    monkeypatch.setattr(memo, "SAMPLE", 10**9)
    exact = memo.deep_size(value)  # every object walked
    assert 590_000 < exact < 600_000  # 2,208 buckets: what the issue measured (~590 KB)
    assert exact <= sampled < 1.25 * exact  # a shared object is counted once per sampled item


def test_the_cache_stays_within_its_bound_and_evicts_the_least_recent() -> None:
    bound = memo.Bound("test", 20_000)
    calls: list[int] = []

    def make(n: int) -> str:
        calls.append(n)
        return "y" * 2_000 + str(n)

    cached = memo.Memo(make, bound)
    for n in range(100):
        cached(n)
        assert bound.bytes <= 20_000
    assert 4 <= len(bound) <= 9  # ~2.3 KB an entry
    calls.clear()
    cached(99)
    assert calls == []  # the most recent is kept
    cached(0)
    assert calls == [0]  # the oldest was evicted


def test_a_value_bigger_than_the_bound_is_computed_not_cached() -> None:
    bound = memo.Bound("test", 1_000)
    cached = memo.Memo(lambda n: "z" * n, bound)
    assert cached(5_000) == "z" * 5_000
    assert len(bound) == 0 and bound.bytes == 0


def test_configure_bounds_every_cache_by_its_setting() -> None:
    before = {name: b.max_bytes for name, b in memo.BOUNDS.items()}
    assert {"api_tiling_cache_bytes", "api_read_plan_cache_bytes", "url_cache_bytes"} <= set(before)
    try:
        memo.configure(Settings(api_tiling_cache_bytes=12_345, url_cache_bytes=0))
        assert memo.BOUNDS["api_tiling_cache_bytes"].max_bytes == 12_345
        assert memo.BOUNDS["url_cache_bytes"].max_bytes == 0
        start = datetime(2026, 1, 1, tzinfo=UTC)
        buckets(start, start + timedelta(days=30), Granularity.HOUR)  # ~190 KB: above the bound
        assert memo.BOUNDS["api_tiling_cache_bytes"].bytes <= 12_345
    finally:
        for name, b in memo.BOUNDS.items():
            b.resize(before[name])
