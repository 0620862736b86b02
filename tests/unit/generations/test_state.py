"""Generation states: the stored strings, and which states can be dropped."""

from __future__ import annotations

import pytest

from generations.state import DROPPED, IN_PROGRESS, RETAINED, GenerationState


def test_every_state_is_stored_as_the_string_it_always_was() -> None:
    # Registry documents written before the enum existed hold these strings; they must still load.
    assert [s.value for s in GenerationState] == [
        "opening",
        "building",
        "served",
        "superseded",
        "retired",
        "failed",
        "retired-dropped",
        "failed-dropped",
    ]
    for state in GenerationState:
        assert GenerationState(state.value) is state
        assert state == state.value and str(state) == state.value and f"{state}" == state.value


def test_retired_and_failed_generations_are_the_ones_whose_data_is_dropped() -> None:
    assert GenerationState.RETIRED.dropped() is GenerationState.RETIRED_DROPPED
    assert GenerationState.FAILED.dropped() is GenerationState.FAILED_DROPPED
    assert frozenset({GenerationState.RETIRED_DROPPED, GenerationState.FAILED_DROPPED}) == DROPPED


@pytest.mark.parametrize(
    "state", [s for s in GenerationState if s not in (GenerationState.RETIRED, GenerationState.FAILED)]
)
def test_no_other_state_has_a_dropped_state(state: GenerationState) -> None:
    with pytest.raises(ValueError, match="never dropped"):
        state.dropped()


def test_the_groups_do_not_overlap() -> None:
    assert not (IN_PROGRESS & RETAINED) and not (IN_PROGRESS & DROPPED) and not (RETAINED & DROPPED)
    assert {"opening", "building"} == IN_PROGRESS and {"served", "superseded"} == RETAINED
