"""The serving layer without services: tiling properties, tokens, the cache, and the serving oracle
suite (tests.serving_suite) on the in-memory readers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving_layer import Granularity, InvalidQuery, check_range
from serving_layer.consistency import decode_token, encode_token, pending
from serving_layer.tiling import DAY, HOUR, buckets, tile
from tests.serving_suite import BASE, ServingOracle, hours
from tests.serving_support import MemoryBackend

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


# --- the serving oracle suite ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def backend() -> Iterator[MemoryBackend]:
    yield MemoryBackend()


class TestServingInMemory(ServingOracle):
    """tests.serving_suite on stores.memory's readers."""
