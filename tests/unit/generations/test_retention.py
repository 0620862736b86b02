"""Which generations are retired, which expire, and what garbage collection must keep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from generations import retention
from generations.model import Generation
from generations.state import GenerationState as S

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
GRACE_S = 600.0


def gen(
    n: int,
    state: S,
    day_map: dict[str, dict[str, int]] | None = None,
    retired_s_ago: float | None = None,
    finished_s_ago: float | None = None,
) -> Generation:
    def ago(s: float | None) -> datetime | None:
        return None if s is None else NOW - timedelta(seconds=s)

    return Generation(
        n,
        "incremental",
        state,
        {0: n * 100},
        started_at=NOW - timedelta(days=1),
        finished_at=ago(finished_s_ago),
        retired_at=ago(retired_s_ago),
        day_map=day_map or {},
    )


def test_all_but_the_newest_published_generations_are_retired() -> None:
    history = [
        gen(1, S.RETIRED),
        gen(2, S.SUPERSEDED),
        gen(3, S.FAILED),
        gen(4, S.SUPERSEDED),
        gen(5, S.SERVED),
        gen(6, S.BUILDING),
    ]
    assert [g.gen for g in retention.to_retire(history, keep=2)] == [2]
    assert [g.gen for g in retention.to_retire(history, keep=3)] == []
    assert [g.gen for g in retention.to_retire(history, keep=0)] == [2, 4, 5]


def test_retired_and_failed_generations_expire_after_the_grace_period_only() -> None:
    history = [
        gen(1, S.RETIRED, retired_s_ago=GRACE_S),  # exactly at the end of its grace: expired
        gen(2, S.RETIRED, retired_s_ago=GRACE_S - 1),
        gen(3, S.FAILED, finished_s_ago=GRACE_S + 1),
        gen(4, S.FAILED, finished_s_ago=1),
        gen(5, S.RETIRED_DROPPED, retired_s_ago=10 * GRACE_S),  # already dropped: not again
        gen(6, S.SERVED, finished_s_ago=10 * GRACE_S),
        gen(7, S.BUILDING),
    ]
    assert [g.gen for g in retention.expired(history, GRACE_S, NOW)] == [1, 3]
    assert [g.gen for g in retention.expired(history, 0.0, NOW)] == [1, 2, 3, 4]


def test_garbage_collection_keeps_what_served_and_superseded_day_maps_name() -> None:
    history = [
        gen(1, S.RETIRED, {"page": {"d1": 1}}, retired_s_ago=GRACE_S * 2),
        gen(2, S.SUPERSEDED, {"page": {"d1": 1, "d2": 2}, "site": {"d1": 2}}),
        gen(3, S.SERVED, {"page": {"d1": 1, "d2": 3}, "site": {"d1": 3}}),
    ]
    plan = retention.plan(history, GRACE_S, NOW)
    assert plan.retained == {2, 3}
    # Generation 1 is retired and expired, but its "page" collection still serves day d1.
    assert plan.referenced == {("page", 1), ("page", 2), ("site", 2), ("page", 3), ("site", 3)}
    assert plan.protected == set()
    assert [g.gen for g in plan.expired] == [1]


def test_runs_in_progress_and_retired_generations_in_their_grace_are_protected() -> None:
    history = [
        gen(1, S.RETIRED, {"page": {"d1": 1}}, retired_s_ago=GRACE_S - 1),
        gen(2, S.RETIRED, {"page": {"d1": 2}}, retired_s_ago=GRACE_S + 1),
        gen(3, S.FAILED, finished_s_ago=1),
        gen(4, S.SERVED, {"page": {"d1": 4}}),
        gen(5, S.OPENING),
        gen(6, S.BUILDING),
        gen(7, S.FAILED_DROPPED, finished_s_ago=GRACE_S * 9),
    ]
    plan = retention.plan(history, GRACE_S, NOW)
    assert plan.protected == {1, 5, 6}
    assert plan.retained == {4} and plan.referenced == {("page", 4)}
    assert [g.gen for g in plan.expired] == [2]


def test_nothing_registered_keeps_nothing() -> None:
    plan = retention.plan([], GRACE_S, NOW)
    assert not plan.retained and not plan.referenced and not plan.protected and not plan.expired
