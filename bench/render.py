"""Rendering benchmark: api.render's hand-built dicts + orjson against the pydantic response models.

The answers are the largest the API gives routinely: a 30-day hourly /v1/timeseries (720
buckets, each with page views and visitors) and a 10-value /v1/breakdown. Each is rendered to
JSON bytes ``--number`` times, twice over, in ``--rounds`` alternating rounds (so that the load
of a shared machine weighs on both alike):

  hand    api.render's dict, encoded by orjson (what the API does);
  models  the same answer built as api.schemas models (validated on construction) and encoded by
          pydantic's serializer (``__pydantic_serializer__.to_json``): the models as the one
          definition at run time.

Both give the same content (checked before timing). Printed and written to
``bench/results/render.json``: microseconds per render of the best round, and the median over the
rounds of models/hand.

    python -m bench.render
    python -m bench.render --number 2000 --rounds 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from api import render
from api.schemas import (
    BreakdownEntry,
    BreakdownResponse,
    BreakdownTotals,
    Covers,
    Exactness,
    TimeseriesPoint,
    TimeseriesResponse,
    Totals,
)
from api.schemas import Distinct as DistinctModel
from bench.common import write_result
from serving_layer import (
    Coverage,
    Distinct,
    Granularity,
    SeriesAnswer,
    SeriesPoint,
    SeriesQuery,
    TopAnswer,
    TopQuery,
)
from views.scopes import value_of

START = datetime(2026, 10, 22, tzinfo=UTC)
SITE = "shop.example.com"
COVERAGE = Coverage(
    12, {0: 2496775, 1: 2506513}, datetime(2026, 11, 21, 6, tzinfo=UTC), {0: 2503120, 1: 2512877}, False, ()
)
VISITORS = Distinct(790.4123, 775.1234, 806.2345, False)
METRICS = ("visitors", "pageviews")
"""The default metrics: the answers as they were before visits."""
NO_VISITS: dict[str, Any] = dict.fromkeys(("visits", "views_per_visit", "bounce_rate", "visit_duration"))


def _exactness(visitors_exact: bool) -> dict[str, Exactness]:
    hll = None if visitors_exact else render.HLL_REASON
    return {
        "visitors": Exactness(exact=visitors_exact, reason=hll, days=[]),
        "pageviews": Exactness(exact=True, reason=None, days=[]),
    }


TIMESERIES = SeriesAnswer(
    SeriesQuery("country", f"{SITE}|DE", START, START + timedelta(days=30), Granularity.HOUR),
    [
        SeriesPoint(START + timedelta(hours=h), 100 + h, Distinct(40.0 + h, 39.0 + h, 41.5 + h, h % 2 == 0))
        for h in range(720)
    ],
    123456,
    VISITORS,
    COVERAGE,
)
BREAKDOWN = TopAnswer(
    TopQuery("referrer", START, START + timedelta(days=7), 10, SITE, visitors=True),
    START,
    START + timedelta(days=7),
    [(f"{SITE}|www.site{i}.com", 5000 - i) for i in range(10)],
    COVERAGE,
    [VISITORS] * 10,
    80112,
    VISITORS,
)


def hand_timeseries() -> bytes:
    return orjson.dumps(render.timeseries(TIMESERIES, SITE, "DE", METRICS), option=render.JSON_OPTIONS)


def hand_breakdown() -> bytes:
    return orjson.dumps(
        render.breakdown(BREAKDOWN, per_site=True, metrics=METRICS), option=render.JSON_OPTIONS
    )


def _distinct(d: Distinct) -> DistinctModel:
    return DistinctModel(
        estimate=round(d.estimate, 2), lower=round(d.lower, 2), upper=round(d.upper, 2), exact=d.exact
    )


def _meta(c: Coverage) -> dict[str, Any]:
    covers = Covers(
        generation=c.generation,
        batch_offsets={str(p): o for p, o in c.batch_offsets.items()},
        batch_as_of=c.batch_as_of,
        realtime_offsets=None
        if c.realtime_offsets is None
        else {str(p): o for p, o in c.realtime_offsets.items()},
    )
    return {"partial": c.partial, "missing": list(c.missing), "covers": covers}


def model_timeseries() -> bytes:
    a, q = TIMESERIES, TIMESERIES.query
    m = TimeseriesResponse(
        dimension=q.view,
        site=SITE,
        value="DE",
        **{"from": q.start},
        to=q.end,
        granularity=q.granularity,
        metrics=list(METRICS),
        series=[
            TimeseriesPoint(start=p.start, pageviews=p.pageviews, visitors=_distinct(p.visitors), **NO_VISITS)
            for p in a.series
        ],
        total=Totals(pageviews=a.pageviews, visitors=_distinct(a.visitors), **NO_VISITS),
        exactness=_exactness(a.visitors.exact and all(p.visitors.exact for p in a.series)),
        **_meta(a.coverage),
    )
    return m.__pydantic_serializer__.to_json(m, by_alias=True)


def model_breakdown() -> bytes:
    a = BREAKDOWN
    assert a.visitors is not None and a.total_visitors is not None
    m = BreakdownResponse(
        dimension=a.query.view,
        site=a.query.site,
        **{"from": a.start},
        to=a.end,
        limit=a.query.limit,
        metrics=list(METRICS),
        entries=[
            BreakdownEntry(
                rank=i,
                value=value_of(k, True),
                pageviews=v,
                visitors=None if d is None else _distinct(d),
                **NO_VISITS,
            )
            for i, ((k, v), d) in enumerate(zip(a.entries, a.visitors, strict=True), 1)
        ],
        totals=BreakdownTotals(
            pageviews=a.total_pageviews, visitors=_distinct(a.total_visitors), **NO_VISITS
        ),
        exactness=_exactness(all(d is None or d.exact for d in [*a.visitors, a.total_visitors])),
        **_meta(a.coverage),
    )
    return m.__pydantic_serializer__.to_json(m, by_alias=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=10_000, help="renders of each kind")
    parser.add_argument("--rounds", type=int, default=10, help="alternating timed rounds they are split in")
    args = parser.parse_args()
    pairs: list[tuple[str, Callable[[], bytes], Callable[[], bytes]]] = [
        ("timeseries, 720 hourly buckets", hand_timeseries, model_timeseries),
        ("breakdown, 10 values", hand_breakdown, model_breakdown),
    ]
    per_round = max(1, args.number // args.rounds)
    answers: dict[str, dict[str, float]] = {}
    for key, (name, hand, model) in zip(("timeseries_720_hours", "breakdown_10_values"), pairs, strict=True):
        assert orjson.loads(hand()) == orjson.loads(model()), f"{name}: the two renders differ"
        times: dict[str, list[float]] = {"hand": [], "models": []}
        ratios = []
        for _ in range(args.rounds):
            for label, f in (("hand", hand), ("models", model)):
                times[label].append(timeit.timeit(f, number=per_round) / per_round * 1e6)
            ratios.append(times["models"][-1] / times["hand"][-1])
        print(
            f"{name}: hand {min(times['hand']):.1f} us, models {min(times['models']):.1f} us per render "
            f"(best round); models/hand {statistics.median(ratios):.2f}x (median of {args.rounds} rounds)"
        )
        answers[key] = {
            "hand_us": round(min(times["hand"]), 1),
            "models_us": round(min(times["models"]), 1),
            "models_over_hand": round(statistics.median(ratios), 2),
        }
    command = " ".join(["python -m bench.render", *sys.argv[1:]])
    path = write_result(
        "render", {"command": command, "renders": args.number, "rounds": args.rounds, "answers": answers}
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
