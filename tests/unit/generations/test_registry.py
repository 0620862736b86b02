"""The registry's documents and its lock's liveness check, without services (the registry on
MongoDB and Redis: tests/integration/generations/test_generations.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generations.model import Generation, GenerationError
from generations.state import GenerationState
from stores.mongo.generations import generation_document, generation_of

times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
day_maps = st.dictionaries(
    st.sampled_from(["page", "site", "country"]),
    st.dictionaries(st.dates().map(str), st.integers(1, 1000), max_size=4),
    max_size=3,
)


@given(
    gen=st.integers(1, 10**6),
    kind=st.sampled_from(["full", "incremental"]),
    state=st.sampled_from(GenerationState),
    cut=st.dictionaries(st.integers(0, 63), st.integers(0, 2**62), max_size=8),
    started_at=times,
    finished_at=st.none() | times,
    day_map=day_maps,
)
def test_a_generation_round_trips_through_its_document(
    gen: int,
    kind: str,
    state: GenerationState,
    cut: dict[int, int],
    started_at: datetime,
    finished_at: datetime | None,
    day_map: dict[str, dict[str, int]],
) -> None:
    g = Generation(gen, kind, state, cut, started_at, finished_at=finished_at, day_map=day_map)
    doc = generation_document(g)
    assert doc["state"] == state.value and all(isinstance(p, str) for p in doc["cut"])  # BSON keys
    back = generation_of(doc)
    assert back == g and type(back.state) is GenerationState


def test_a_document_as_mongodb_returns_it_loads_with_aware_times_and_defaults() -> None:
    # Naive datetimes (what the stores return), plain strings (what older versions stored), and
    # none of the optional fields.
    doc: dict[str, Any] = {
        "_id": 3,
        "kind": "incremental",
        "state": "retired-dropped",
        "cut": {"0": 10, "1": 7},
        "started_at": datetime(2024, 5, 1, 12, 0),
    }
    g = generation_of(doc)
    assert g.state is GenerationState.RETIRED_DROPPED and g.cut == {0: 10, 1: 7}
    assert g.started_at == datetime(2024, 5, 1, 12, 0, tzinfo=UTC) and g.finished_at is None
    assert (g.day_map, g.fingerprints, g.views, g.stats, g.error) == ({}, {}, {}, {}, None)


def test_an_unknown_state_is_an_error_naming_the_generation() -> None:
    doc = {"_id": 9, "kind": "full", "state": "archived", "cut": {}, "started_at": datetime(2024, 1, 1)}
    with pytest.raises(GenerationError, match=r"generation 9: unknown state 'archived'"):
        generation_of(doc)
