"""The `metrics` parameter: Plausible's names, the defaults, and the combinations a dimension cannot
answer, each refused naming `metrics` and the names at fault."""

from __future__ import annotations

from typing import Any

import pytest

from api.metric_names import METRICS, answered_by, metrics_of
from serving_layer import InvalidQuery

PAGE = {"per_site": False, "visits": False, "pageviews": True}
COUNTRY = {"per_site": True, "visits": True, "pageviews": True}
ENTRY = {"per_site": False, "visits": True, "pageviews": False}
OLD = {"per_site": True}
"""A description stored by a generation older than visits: page views only."""


@pytest.mark.parametrize(
    ("raw", "info", "expected"),
    [
        (None, COUNTRY, ("visitors", "pageviews")),
        (None, PAGE, ("visitors", "pageviews")),
        (None, ENTRY, ("visits",)),
        (None, OLD, ("visitors", "pageviews")),
        (",".join(METRICS), COUNTRY, METRICS),
        ("bounce_rate, visits", ENTRY, ("bounce_rate", "visits")),
        ("pageviews", PAGE, ("pageviews",)),
    ],
)
def test_metrics_and_their_defaults(raw: str | None, info: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert metrics_of(raw, "x", info) == expected


@pytest.mark.parametrize(
    ("raw", "info", "named"),
    [
        ("visits,sessions,bounce", COUNTRY, ["'sessions'", "'bounce'"]),
        ("", COUNTRY, ["at least one"]),
        (",", COUNTRY, ["at least one"]),
        ("visits,visits", COUNTRY, ["'visits' named twice"]),
        ("visits,pageviews,visitors", ENTRY, ["'pageviews', 'visitors'", "visits only"]),
        ("pageviews,bounce_rate,visit_duration", PAGE, ["'bounce_rate', 'visit_duration'", "no visits"]),
        ("visits", OLD, ["'visits'"]),
    ],
)
def test_bad_names_and_combinations_name_metrics_and_the_culprits(
    raw: str, info: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(InvalidQuery) as caught:
        metrics_of(raw, "x", info)
    assert caught.value.param == "metrics"
    for text in named:
        assert text in caught.value.problem


def test_each_dimension_lists_what_it_answers() -> None:
    assert answered_by(COUNTRY) == list(METRICS)
    assert answered_by(PAGE) == ["visitors", "pageviews"]
    assert answered_by(ENTRY) == ["visits", "views_per_visit", "bounce_rate", "visit_duration"]
