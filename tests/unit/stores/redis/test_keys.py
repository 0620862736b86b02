"""The Redis encodings of the generation protocol round-trip exactly, and key names stay apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stores.redis import keys
from views.registry import view_mark

offsets = st.dictionaries(st.integers(0, 63), st.integers(0, 2**62), max_size=8)
generations = st.integers(0, 10**6)


@given(st.dictionaries(generations, offsets, max_size=6))
def test_active_generations_round_trip(active: dict[int, keys.Offsets]) -> None:
    encoded = keys.encode_active(active)
    assert keys.decode_active(encoded) == active
    assert keys.decode_active(encoded.encode()) == active  # redis-py hands back bytes


@given(st.builds(keys.Served, st.integers(-1, 10**6), offsets))
def test_served_pointer_round_trips(served: keys.Served) -> None:
    assert keys.decode_served(keys.encode_served(served)) == served


@given(st.builds(keys.SpeedCommit, st.integers(-1, 10**9), offsets))
def test_speed_commit_round_trips(commit: keys.SpeedCommit) -> None:
    assert keys.decode_commit(keys.encode_commit(commit)) == commit


def test_missing_keys_decode_to_nothing_served_and_nothing_committed() -> None:
    # Redis lost its data, or nothing ran yet: the callers restore or start from these.
    assert keys.decode_active(None) == {} and keys.decode_active(b"") == {}
    assert keys.decode_served(None) == keys.Served(-1, {})
    assert keys.decode_commit(None) == keys.SpeedCommit(-1, {})


def test_realtime_keys_of_a_generation_match_its_pattern_only() -> None:
    import fnmatch

    mine = [
        keys.realtime_key(12, "page", "/a", "2024-01-02"),
        keys.realtime_rank_key(12, "page", "2024-01-02"),
        keys.realtime_views_key(12),
    ]
    other = keys.realtime_key(1, "page", "/a", "2024-01-02")
    assert all(fnmatch.fnmatchcase(k, keys.realtime_pattern(12)) for k in mine)
    assert not fnmatch.fnmatchcase(other, keys.realtime_pattern(12))
    assert not fnmatch.fnmatchcase(keys.realtime_key(120, "page", "/a", "d"), keys.realtime_pattern(12))
    assert keys.hour_field(keys.PV, 7) == "pv:07" and view_mark("page", "ab12") == "page@ab12"
