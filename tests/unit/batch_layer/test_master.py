"""The master dataset's manifest: segment documents, where the absorbed log ends, and which
offsets the next segment must hold."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batch_layer.master import AbsorbError, absorb_ranges
from stores.manifest import Segment, segments_end
from stores.mongo.manifest import segment_document, segment_of

T = datetime(2024, 6, 1, tzinfo=UTC)


def segment(gen: int, ranges: dict[int, tuple[int, int]]) -> Segment:
    return Segment(f"g{gen:06d}-x", gen, f"seg-{gen}", ranges, 1, 0, ["2024-06-01"], T)


def test_a_segment_round_trips_through_its_manifest_document() -> None:
    s = Segment(
        "g000004-ab12cd34",
        4,
        "file:///m/segments/segment=g000004-ab12cd34",
        {0: (10, 20), 3: (0, 5)},
        14,
        1,
        ["2024-05-31", "2024-06-01"],
        T,
        {"url": 1},
    )
    doc = segment_document(s)
    assert doc["_id"] == s.segment_id and doc["ranges"] == {"0": [10, 20], "3": [0, 5]}
    assert segment_of(doc) == s
    del doc["invalid_reasons"]  # a segment committed before reasons were recorded
    assert segment_of(doc).invalid_reasons == {}


def test_the_absorbed_log_ends_at_the_highest_end_of_each_partition() -> None:
    segments = [segment(1, {0: (0, 10), 1: (0, 4)}), segment(2, {0: (10, 25)}), segment(3, {2: (7, 9)})]
    assert segments_end(segments) == {0: 25, 1: 4, 2: 9}
    assert segments_end([]) == {}


def test_the_next_segment_starts_where_the_master_dataset_ends_and_stops_at_the_cut() -> None:
    ranges = absorb_ranges(cut={0: 30, 1: 4, 2: 6}, absorbed={0: 25, 1: 4}, log_start={})
    # Partition 1 has nothing new; partition 2 was never absorbed and starts at the log's start.
    assert ranges == {0: (25, 30), 2: (0, 6)}


def test_a_partition_never_absorbed_starts_at_its_log_start(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "batch_layer.master"):
        assert absorb_ranges({0: 50}, {}, {0: 20}) == {0: (20, 50)}
    assert "older events were deleted before any absorb" in caplog.text


def test_offsets_deleted_by_retention_before_they_were_absorbed_fail_the_absorb() -> None:
    with pytest.raises(AbsorbError, match=r"partition 0: offsets 25\.\.40 were deleted by retention"):
        absorb_ranges({0: 50}, {0: 25}, {0: 40})


@given(st.lists(st.dictionaries(st.integers(0, 3), st.integers(1, 100), min_size=1), min_size=1, max_size=6))
def test_successive_absorbs_cover_the_log_once_without_gaps(cuts: list[dict[int, int]]) -> None:
    """Cuts only grow (each is at or after the log end and the speed layer's commit); the segments
    absorbed at successive cuts hold every offset below the last cut exactly once."""
    segments: list[Segment] = []
    cut: dict[int, int] = {}
    for i, step in enumerate(cuts):
        cut = {p: cut.get(p, 0) + step.get(p, 0) for p in set(cut) | set(step)}
        ranges = absorb_ranges(cut, segments_end(segments), {})
        if ranges:
            segments.append(segment(i + 1, ranges))
    for p, end in cut.items():
        covered = sorted(o for s in segments if p in s.ranges for o in range(*s.ranges[p]))
        assert covered == list(range(end))
