"""Which days an incremental run recomputes (batch_layer.job.plan_days), from small manifests."""

from __future__ import annotations

from datetime import UTC, datetime

from batch_layer.job import plan_days
from generations.model import Generation
from generations.state import GenerationState
from stores.manifest import Segment

T = datetime(2024, 6, 1, tzinfo=UTC)
ALL_DAYS = ["2024-05-30", "2024-05-31", "2024-06-01"]
FINGERPRINTS = {"page": "fp-page", "site": "fp-site"}


def segment(gen: int, days: list[str]) -> Segment:
    return Segment(f"g{gen:06d}-x", gen, f"seg-{gen}", {0: (0, 1)}, 1, 0, days, T)


def served(gen: int, fingerprints: dict[str, str], views: tuple[str, ...] = ("page", "site")) -> Generation:
    return Generation(
        gen,
        "incremental",
        GenerationState.SERVED,
        {0: 1},
        T,
        day_map={v: dict.fromkeys(ALL_DAYS[:2], gen) for v in views},
        fingerprints=fingerprints,
    )


SEGMENTS = [segment(1, ALL_DAYS[:2]), segment(2, ["2024-05-31"]), segment(3, ["2024-05-31", "2024-06-01"])]


def test_an_incremental_run_recomputes_the_days_of_segments_newer_than_the_served_generation() -> None:
    plan = plan_days(FINGERPRINTS, False, served(2, FINGERPRINTS), SEGMENTS, ALL_DAYS)
    # Segment 3 (absorbed by this run) holds events of two days, one of them late.
    assert plan == {"page": ["2024-05-31", "2024-06-01"], "site": ["2024-05-31", "2024-06-01"]}


def test_nothing_new_recomputes_nothing() -> None:
    plan = plan_days(FINGERPRINTS, False, served(3, FINGERPRINTS), SEGMENTS, ALL_DAYS)
    assert plan == {"page": [], "site": []}


def test_the_first_run_and_a_full_run_recompute_every_day() -> None:
    assert plan_days(FINGERPRINTS, False, None, SEGMENTS, ALL_DAYS) == dict.fromkeys(FINGERPRINTS, ALL_DAYS)
    full = plan_days(FINGERPRINTS, True, served(3, FINGERPRINTS), SEGMENTS, ALL_DAYS)
    assert full == dict.fromkeys(FINGERPRINTS, ALL_DAYS)


def test_a_view_whose_code_changed_is_recomputed_in_full_the_others_incrementally() -> None:
    # The served documents of "site" were made by other code: reusing them would mix two definitions.
    old = served(2, {"page": "fp-page", "site": "fp-site-old"})
    plan = plan_days(FINGERPRINTS, False, old, SEGMENTS, ALL_DAYS)
    assert plan == {"page": ["2024-05-31", "2024-06-01"], "site": ALL_DAYS}


def test_a_view_the_served_generation_lacks_is_recomputed_in_full() -> None:
    without_site = served(2, FINGERPRINTS, views=("page",))
    plan = plan_days(FINGERPRINTS, False, without_site, SEGMENTS, ALL_DAYS)
    assert plan == {"page": ["2024-05-31", "2024-06-01"], "site": ALL_DAYS}


def test_the_filter_table_is_planned_like_a_view() -> None:
    """Its days follow its own fingerprint: new days while it is unchanged, every day when its code
    changed or the served generation was made with the table turned off."""
    with_table = {**FINGERPRINTS, "filters": "fp-filters"}
    same = served(2, with_table, views=("page", "site", "filters"))
    assert plan_days(with_table, False, same, SEGMENTS, ALL_DAYS)["filters"] == ["2024-05-31", "2024-06-01"]
    changed = served(2, {**with_table, "filters": "fp-filters-old"}, views=("page", "site", "filters"))
    plan = plan_days(with_table, False, changed, SEGMENTS, ALL_DAYS)
    assert plan == {
        "page": ["2024-05-31", "2024-06-01"],
        "site": ["2024-05-31", "2024-06-01"],
        "filters": ALL_DAYS,
    }
    turned_off_before = served(2, FINGERPRINTS)
    assert plan_days(with_table, False, turned_off_before, SEGMENTS, ALL_DAYS)["filters"] == ALL_DAYS
