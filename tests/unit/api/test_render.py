"""api.render against api.schemas: the response models are the one definition of every answer's
shape, and each renderer's JSON must be exactly what its model describes.

For every renderer, in every variant of its answer (realtime missing, visitors absent, no site):
the JSON validates against the model, the model gives back the same content (so no key the model
lacks, none missing, no value the model would write otherwise), and every object's keys come in
the model's field order, its own fields before the inherited ones: the answer's meta
(api.schemas.AnswerMeta: ``partial``, ``missing``, ``covers``) comes last in every answer, where
clients have always found it, and a bucket's ``start`` before its visitors (api.schemas.Distinct).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from api import render
from api.events import Accepted
from api.schemas import (
    BreakdownResponse,
    CurrentVisitorsResponse,
    DimensionsResponse,
    EventsAccepted,
    HealthResponse,
    PageviewsResponse,
    TimeseriesResponse,
    TopUrlsResponse,
    UniqueVisitorsResponse,
)
from serving_layer import (
    Coverage,
    Distinct,
    Granularity,
    PageviewPoint,
    PageviewsAnswer,
    SeriesAnswer,
    SeriesPoint,
    SeriesQuery,
    TopAnswer,
    TopQuery,
    UniqueVisitorsAnswer,
)
from serving_layer.answers import Visits, VisitsExactness
from serving_layer.comparison import Compare, Compared
from serving_layer.current_visitors import CurrentAnswer, CurrentQuery, window

BASE = datetime(2026, 11, 20, tzinfo=UTC)
SITE = "shop.example.com"
END = BASE + timedelta(days=2)
FULL = Coverage(12, {0: 2496775, 1: 2506513}, BASE + timedelta(microseconds=123456), {0: 2503120}, False, ())
PARTIAL = Coverage(12, {0: 2496775, 1: 2506513}, BASE, None, True, ("realtime",))
ESTIMATE = Distinct(790.4123, 775.1234, 806.2345, False)
EXACT = Distinct(812.0, 812.0, 812.0, True)
VISITS = Visits(9, 4, 1_234_567, 31)
DEFAULT = ("visitors", "pageviews")
ALL = ("visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration")


def points(n: int) -> list[datetime]:
    return [BASE + timedelta(hours=h) for h in range(n)]


def field_order(model: type[BaseModel]) -> list[str]:
    """The keys of a model's JSON in the order the renderer writes them: the model's own fields,
    then those it inherits (a base class is the part answers share, written after the rest)."""
    names: list[str] = []
    for cls in model.__mro__:
        for name in inspect.get_annotations(cls):
            info = model.model_fields.get(name)
            if info is not None and (info.alias or name) not in names:
                names.append(info.alias or name)
    return names


def assert_key_order(value: Any, parsed: Any) -> None:
    if isinstance(parsed, BaseModel):
        assert list(value) == field_order(type(parsed)), type(parsed).__name__
        for name, info in type(parsed).model_fields.items():
            assert_key_order(value[info.alias or name], getattr(parsed, name))
    elif isinstance(parsed, list):
        for v, p in zip(value, parsed, strict=True):
            assert_key_order(v, p)
    elif isinstance(parsed, dict):
        for k, p in parsed.items():
            assert_key_order(value[str(k)], p)


def assert_conforms(content: dict[str, Any], model: type[BaseModel]) -> None:
    body = render.json_response(content).body
    parsed = model.model_validate_json(body)
    assert orjson.loads(parsed.model_dump_json(by_alias=True)) == orjson.loads(body)
    assert_key_order(orjson.loads(body), parsed)


def countries(exactness: VisitsExactness | None = None) -> TopAnswer:
    """A breakdown by country with every metric."""
    return TopAnswer(
        TopQuery("country", BASE, END, 2, "shop.example.com", visitors=True, visits=True),
        BASE,
        END,
        [("shop.example.com|DE", 50), ("shop.example.com|US", 7)],
        FULL,
        [ESTIMATE, EXACT],
        80,
        ESTIMATE,
        [VISITS, Visits()],
        VISITS,
        exactness or VisitsExactness(),
    )


def series_query(view: str, key: str) -> SeriesQuery:
    return SeriesQuery(view, key, BASE, END, Granularity.HOUR)


RENDERED: dict[str, tuple[Callable[[], dict[str, Any]], type[BaseModel]]] = {
    "pageviews": (
        lambda: render.pageviews(
            PageviewsAnswer(
                series_query("page", "https://shop.example.com/cart"),
                [PageviewPoint(t, 120 + i) for i, t in enumerate(points(48))],
                6888,
                FULL,
            )
        ),
        PageviewsResponse,
    ),
    "pageviews of a site, realtime missing": (
        lambda: render.pageviews(
            PageviewsAnswer(series_query("site", "shop.example.com"), [PageviewPoint(BASE, 3)], 3, PARTIAL)
        ),
        PageviewsResponse,
    ),
    "unique visitors": (
        lambda: render.unique_visitors(
            UniqueVisitorsAnswer(
                series_query("page", "https://shop.example.com/cart"),
                [(t, EXACT if i % 2 else ESTIMATE) for i, t in enumerate(points(48))],
                ESTIMATE,
                FULL,
            )
        ),
        UniqueVisitorsResponse,
    ),
    "top urls": (
        lambda: render.top(
            TopAnswer(
                TopQuery("page", BASE, END, 2),
                BASE,
                END,
                [("https://shop.example.com/", 51234), ("https://blog.example.com/", 20410)],
                FULL,
            )
        ),
        TopUrlsResponse,
    ),
    "top urls of a site, realtime missing": (
        lambda: render.top(
            TopAnswer(TopQuery("page", BASE, END, 5, "shop.example.com"), BASE, END, [], PARTIAL)
        ),
        TopUrlsResponse,
    ),
    "timeseries": (
        lambda: render.timeseries(
            SeriesAnswer(
                series_query("country", "shop.example.com|DE"),
                [SeriesPoint(t, 100 + i, ESTIMATE) for i, t in enumerate(points(48))],
                5928,
                EXACT,
                FULL,
            ),
            "shop.example.com",
            "DE",
            DEFAULT,
        ),
        TimeseriesResponse,
    ),
    "timeseries compared with the previous period, realtime missing in it": (
        lambda: render.timeseries(
            SeriesAnswer(
                series_query("site", "shop.example.com"),
                [SeriesPoint(t, 10 + i, EXACT, VISITS) for i, t in enumerate(points(48))],
                5928,
                ESTIMATE,
                FULL,
                VISITS,
            ),
            "shop.example.com",
            "shop.example.com",
            ALL,
            Compared(
                Compare.PREVIOUS_PERIOD,
                SeriesAnswer(
                    SeriesQuery("site", "shop.example.com", BASE - (END - BASE), BASE, Granularity.HOUR),
                    [SeriesPoint(t - (END - BASE), 0, EXACT, Visits()) for t in points(48)],
                    0,
                    EXACT,
                    PARTIAL,
                    Visits(),
                    VisitsExactness(False, "a late view", ("2026-11-19",)),
                ),
            ),
        ),
        TimeseriesResponse,
    ),
    "timeseries of a site-less dimension": (
        lambda: render.timeseries(
            SeriesAnswer(series_query("site", "shop.example.com"), [], 0, EXACT, PARTIAL),
            None,
            "shop.example.com",
            DEFAULT,
        ),
        TimeseriesResponse,
    ),
    "timeseries with every metric, visits not exact": (
        lambda: render.timeseries(
            SeriesAnswer(
                series_query("site", "shop.example.com"),
                [SeriesPoint(t, 10 + i, EXACT, VISITS if i else Visits()) for i, t in enumerate(points(48))],
                5928,
                ESTIMATE,
                FULL,
                VISITS,
                VisitsExactness(False, "a late view", ("2026-11-20",)),
            ),
            "shop.example.com",
            "shop.example.com",
            ALL,
        ),
        TimeseriesResponse,
    ),
    "timeseries of a visits-only dimension": (
        lambda: render.timeseries(
            SeriesAnswer(
                series_query("entry_page", "https://shop.example.com/"),
                [SeriesPoint(BASE, 0, EXACT, VISITS)],
                0,
                EXACT,
                FULL,
                VISITS,
            ),
            None,
            "https://shop.example.com/",
            ("visits", "bounce_rate"),
        ),
        TimeseriesResponse,
    ),
    "breakdown": (
        lambda: render.breakdown(
            TopAnswer(
                TopQuery("referrer", BASE, END, 10, "shop.example.com", visitors=True),
                BASE,
                END,
                [(f"shop.example.com|www.site{i}.com", 5000 - i) for i in range(10)],
                FULL,
                [ESTIMATE] * 9 + [None],
                80112,
                ESTIMATE,
            ),
            per_site=True,
            metrics=DEFAULT,
        ),
        BreakdownResponse,
    ),
    "breakdown with every metric": (
        lambda: render.breakdown(
            countries(VisitsExactness(False, "a late view", ("2026-11-20", "2026-11-21"))),
            per_site=True,
            metrics=ALL,
        ),
        BreakdownResponse,
    ),
    "breakdown compared a year earlier": (
        lambda: render.breakdown(
            countries(),
            per_site=True,
            metrics=ALL,
            compared=Compared(
                Compare.YEAR_OVER_YEAR,
                TopAnswer(
                    TopQuery("country", BASE, END, 2, "shop.example.com", visitors=True, visits=True),
                    BASE.replace(year=2025),
                    END.replace(year=2025),
                    [("shop.example.com|FR", 3)],
                    FULL,
                    [EXACT],
                    3,
                    EXACT,
                    [Visits(2, 1, 60, 3)],
                    Visits(2, 1, 60, 3),
                ),
            ),
        ),
        BreakdownResponse,
    ),
    "breakdown of a visits-only dimension without a site": (
        lambda: render.breakdown(
            TopAnswer(
                TopQuery("exit_page", BASE, END, 2, visits=True),
                BASE,
                END,
                [("https://shop.example.com/", 9)],
                FULL,
                None,
                9,
                None,
                [VISITS],
            ),
            per_site=False,
            metrics=("visit_duration", "visits"),
        ),
        BreakdownResponse,
    ),
    "breakdown without visitors or site": (
        lambda: render.breakdown(
            TopAnswer(
                TopQuery("page", BASE, END, 2),
                BASE,
                END,
                [("https://shop.example.com/", 7)],
                PARTIAL,
                None,
                7,
            ),
            per_site=False,
            metrics=("pageviews",),
        ),
        BreakdownResponse,
    ),
    "dimensions": (
        lambda: render.dimensions(
            12,
            {
                "country": {
                    "description": "The visitor's country.",
                    "per_site": True,
                    "examples": ["DE"],
                    "visits": True,
                    "pageviews": True,
                },
                "entry_page": {"description": "Entry pages.", "visits": True, "pageviews": False},
                "language": {},
            },
            {"country": None, "entry_page": None, "language": "not ready"},
        ),
        DimensionsResponse,
    ),
    "events accepted": (
        lambda: render.accepted(Accepted([("e-42", 3, 1048576), ("e-43", 0, 7)], "o1.eyIzIjoxMDQ4NTc3fQ")),
        EventsAccepted,
    ),
    "health": (lambda: {"status": "ok"}, HealthResponse),
    "current visitors, covered": (
        lambda: render.current_visitors(current_answer(CurrentQuery(SITE, "site", SITE, 5), covered=True)),
        CurrentVisitorsResponse,
    ),
    "current visitors of a page, not covered": (
        lambda: render.current_visitors(
            current_answer(CurrentQuery(SITE, "page", f"https://{SITE}/p", 3), covered=False)
        ),
        CurrentVisitorsResponse,
    ),
}


def current_answer(q: CurrentQuery, covered: bool) -> CurrentAnswer:
    now = BASE + timedelta(minutes=30, seconds=12)
    return CurrentAnswer(
        q,
        window(now, q.minutes),
        now,
        Distinct(3.0, 3.0, 3.0, True) if covered else None,
        covered,
        now - timedelta(seconds=30),
        None if covered else "not covered",
        {0: 12, 1: 40},
        None if not covered else now - timedelta(seconds=1),
    )


@pytest.mark.parametrize("name", RENDERED)
def test_every_rendered_answer_is_exactly_its_model(name: str) -> None:
    build, model = RENDERED[name]
    assert_conforms(build(), model)


def test_the_check_sees_a_key_the_model_lacks_and_a_reordered_key() -> None:
    good = render.top(TopAnswer(TopQuery("page", BASE, END, 2), BASE, END, [("https://a.example/", 1)], FULL))
    with pytest.raises(AssertionError):
        assert_conforms({**good, "extra": 1}, TopUrlsResponse)
    with pytest.raises(AssertionError):
        assert_conforms({"limit": good.pop("limit"), **good}, TopUrlsResponse)


@pytest.mark.parametrize("model", [TimeseriesResponse, BreakdownResponse])
def test_the_documented_examples_are_answers_of_their_model(model: type[BaseModel]) -> None:
    examples = (model.model_config.get("json_schema_extra") or {}).get("examples")
    assert examples
    for example in examples:
        model.model_validate(example)
