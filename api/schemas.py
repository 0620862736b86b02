"""Response models: the one definition of every answer's shape, and the API's OpenAPI document,
with an example for every answer.

Handlers write their JSON by hand (api.render: dicts encoded by orjson), cheaper than building
and serialising these models on a large answer (docs/design.md has the figures).
So that the two cannot drift, tests/unit/api/test_render.py checks every renderer against its model:
the rendered JSON validates, the model gives back the same content (no key more or less, the same
values), and each object's keys come in the model's order, its own fields before the ones it
inherits (so AnswerMeta's ``partial``, ``missing`` and ``covers`` close every answer). The
schemathesis run (tests/integration/api/test_api_schema.py) checks live answers against the document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving_layer import Granularity

COVERS_EXAMPLE: dict[str, Any] = {
    "generation": 12,
    "batch_offsets": {"0": 2496775, "1": 2506513},
    "batch_as_of": "2026-11-21T06:00:00Z",
    "realtime_offsets": {"0": 2503120, "1": 2512877},
}
META_EXAMPLE: dict[str, Any] = {"partial": False, "missing": [], "covers": COVERS_EXAMPLE}


def _examples(*examples: dict[str, Any]) -> ConfigDict:
    return ConfigDict(populate_by_name=True, json_schema_extra={"examples": list(examples)})


class LostRange(BaseModel):
    offsets: dict[str, list[int]] = Field(description="Kafka partition -> [from, to) offsets lost.")
    accepted_by: str | None
    accepted_at: datetime | None
    events_before: datetime | None = Field(
        description="Every lost event lies before this (its append time bounds it, plus the contract's "
        "future margin)."
    )


class Covers(BaseModel):
    """Which events the answer includes: every event of the log below ``batch_offsets`` (the served
    generation's cut, taken at ``batch_as_of``) and every event below ``realtime_offsets`` (the
    speed layer's last commit; null when the realtime views could not be read)."""

    model_config = _examples(COVERS_EXAMPLE)

    generation: int = Field(description="The served generation the whole answer comes from.")
    batch_offsets: dict[str, int] = Field(description="Kafka partition -> end offset of the batch views.")
    batch_as_of: datetime = Field(description="When the generation's cut was taken.")
    realtime_offsets: dict[str, int] | None = Field(
        description="Kafka partition -> end offset the realtime views include; null if missing."
    )
    lost_to_retention: list[LostRange] = Field(
        default_factory=list,
        description="Offsets of the log that retention deleted before the batch layer absorbed them "
        "(accepted with `python -m batch_layer accept-gap`) and whose events this answer may lack: "
        "listed when the range starts before their `events_before`.",
    )


class AnswerMeta(BaseModel):
    partial: bool = Field(description="True when part of the data could not be read (see `missing`).")
    missing: list[Literal["realtime"]] = Field(description="What the answer lacks when partial.")
    covers: Covers


class PageviewsPoint(BaseModel):
    start: datetime = Field(description="Start of the bucket (UTC); a day bucket may be cut by the range.")
    pageviews: int


class PageviewsResponse(AnswerMeta):
    model_config = _examples(
        {
            "view": "url_traffic",
            "key": "https://shop.example.com/cart",
            "from": "2026-11-20T00:00:00Z",
            "to": "2026-11-20T03:00:00Z",
            "granularity": "hour",
            "series": [
                {"start": "2026-11-20T00:00:00Z", "pageviews": 120},
                {"start": "2026-11-20T01:00:00Z", "pageviews": 97},
                {"start": "2026-11-20T02:00:00Z", "pageviews": 88},
            ],
            "total": 305,
            **META_EXAMPLE,
        }
    )

    view: Literal["url_traffic", "site_traffic"]
    key: str = Field(description="The normalised URL, or the site (host) for site-wide answers.")
    from_: datetime = Field(alias="from")
    to: datetime
    granularity: Granularity
    series: list[PageviewsPoint]
    total: int


class Distinct(BaseModel):
    estimate: float = Field(description="Distinct visitors (an HLL estimate unless `exact`).")
    lower: float = Field(description="95% lower bound.")
    upper: float = Field(description="95% upper bound.")
    exact: bool = Field(
        description="True when the value is the exact count of the batch views alone (no realtime data "
        "contributes and the bucket is one stored batch bucket)."
    )


class DistinctPoint(Distinct):
    start: datetime


class UniqueVisitorsResponse(AnswerMeta):
    model_config = _examples(
        {
            "view": "url_traffic",
            "key": "https://shop.example.com/cart",
            "from": "2026-11-19T00:00:00Z",
            "to": "2026-11-21T00:00:00Z",
            "granularity": "day",
            "series": [
                {"start": "2026-11-19T00:00:00Z", "estimate": 812, "lower": 812, "upper": 812, "exact": True},
                {
                    "start": "2026-11-20T00:00:00Z",
                    "estimate": 790.4,
                    "lower": 775.1,
                    "upper": 806.2,
                    "exact": False,
                },
            ],
            "total": {"estimate": 1490.7, "lower": 1462.3, "upper": 1519.9, "exact": False},
            **META_EXAMPLE,
        }
    )

    view: Literal["url_traffic", "site_traffic"]
    key: str
    from_: datetime = Field(alias="from")
    to: datetime
    granularity: Granularity
    series: list[DistinctPoint]
    total: Distinct = Field(description="Distinct visitors over the whole range: the union, never a sum.")


class CurrentVisitorsResponse(BaseModel):
    """Unique visitors of a site or page over the last minutes of event time, from the speed layer
    (docs/current-visitors.md)."""

    model_config = _examples(
        {
            "site": "shop.example.com",
            "page": None,
            "minutes": 5,
            "from": "2026-11-26T12:25:00Z",
            "to": "2026-11-26T12:31:00Z",
            "as_of": "2026-11-26T12:30:41.318Z",
            "visitors": {"estimate": 37, "lower": 37, "upper": 37, "exact": True},
            "covered": True,
            "counted_before": "2026-11-26T12:30:11.318Z",
            "reason": None,
            "realtime_offsets": {"0": 2503120, "1": 2512877},
            "committed_at": "2026-11-26T12:30:40.002Z",
        },
        {
            "site": "shop.example.com",
            "page": "https://shop.example.com/pricing",
            "minutes": 5,
            "from": "2026-11-26T12:25:00Z",
            "to": "2026-11-26T12:31:00Z",
            "as_of": "2026-11-26T12:30:41.318Z",
            "visitors": None,
            "covered": False,
            "counted_before": "2026-11-26T12:30:11.318Z",
            "reason": "the speed layer has not counted every record appended to the log before "
            "2026-11-26T12:30:11+00:00 (its last commit: 2026-11-26T12:12:03.511Z): the window is not "
            "covered, and a count would be too low",
            "realtime_offsets": {"0": 2488012, "1": 2497310},
            "committed_at": "2026-11-26T12:12:03.511Z",
        },
    )

    site: str = Field(description="The site (host).")
    page: str | None = Field(description="The page (normalised URL), or null for the whole site.")
    minutes: int = Field(description="Whole minutes before the current one in the window.")
    from_: datetime = Field(alias="from", description="Start of the window (event time, inclusive, UTC).")
    to: datetime = Field(description="End of the window (exclusive): the end of the current UTC minute.")
    as_of: datetime = Field(description="The API's clock when it answered (the current minute's).")
    visitors: Distinct | None = Field(
        description="Distinct visitors in the window: exact (`exact: true`) while every minute of it "
        "kept its set of visitors, else the HLL union with 95% bounds; null when not `covered`."
    )
    covered: bool = Field(
        description="Whether the speed layer has counted every record appended to the log before "
        "`counted_before`; false means it is stopped or behind, and no number is given."
    )
    counted_before: datetime = Field(
        description="`as_of` minus LAMBDA_CURRENT_VISITORS_LAG_S: the log-append time up to which every "
        "record must be counted for the window to be covered."
    )
    reason: str | None = Field(description="Why the window is not covered (null when it is).")
    realtime_offsets: dict[str, int] = Field(
        description="Kafka partition -> end offset the answer includes (the speed layer's commit)."
    )
    committed_at: datetime | None = Field(description="When the speed layer made that commit.")


class TopEntry(BaseModel):
    rank: int
    url: str
    pageviews: int


class TopUrlsResponse(AnswerMeta):
    model_config = _examples(
        {
            "from": "2026-11-14T00:00:00Z",
            "to": "2026-11-21T00:00:00Z",
            "limit": 2,
            "site": None,
            "urls": [
                {"rank": 1, "url": "https://shop.example.com/", "pageviews": 51234},
                {"rank": 2, "url": "https://blog.example.com/", "pageviews": 20410},
            ],
            **META_EXAMPLE,
        }
    )

    from_: datetime = Field(alias="from", description="Start of the first whole UTC day ranked.")
    to: datetime = Field(description="End of the last whole UTC day ranked (the range rounded outwards).")
    limit: int
    site: str | None
    urls: list[TopEntry]


Metric = Literal["visitors", "visits", "pageviews", "views_per_visit", "bounce_rate", "visit_duration"]
"""A metric of /v1/timeseries and /v1/breakdown (api.metric_names): Plausible's Stats API names."""


class Figures(BaseModel):
    """The figures of the metrics the query asked for (`metrics`); null for a metric it did not."""

    pageviews: int | None = Field(description="Page views (exact).")
    visitors: Distinct | None = Field(
        description="Unique visitors: an HLL estimate with 95% bounds unless `exact`."
    )
    visits: int | None = Field(
        description="Visits: a visitor's page views on a site, each at most the session gap (30 min) "
        "after the previous one, never across a UTC midnight; credited to the hour of the first view."
    )
    views_per_visit: float | None = Field(
        description="Page views in visits over visits; null without visits."
    )
    bounce_rate: float | None = Field(
        description="Visits of a single page view, in percent of visits; null without visits."
    )
    visit_duration: float | None = Field(
        description="Average visit duration in seconds (last view's time minus the first's); null "
        "without visits."
    )


class Exactness(BaseModel):
    """Whether every figure of one metric in the answer is exact, and if not why."""

    exact: bool
    reason: str | None = Field(description="Why not (null when exact).")
    days: list[str] = Field(
        description="The UTC days (YYYY-MM-DD) whose figures may be off until the next batch run "
        "recomputes them (visit metrics); empty otherwise."
    )


EXACT_EXAMPLE: dict[str, Any] = {"exact": True, "reason": None, "days": []}
HLL_EXAMPLE: dict[str, Any] = {
    "exact": False,
    "reason": "HLL estimates: a figure not marked exact has 95% bounds",
    "days": [],
}
NO_VISITS: dict[str, Any] = dict.fromkeys(("visits", "views_per_visit", "bounce_rate", "visit_duration"))


class Totals(Figures):
    """Over the whole range (visitors: the union, never a sum)."""


class TimeseriesPoint(Figures):
    start: datetime = Field(description="Start of the bucket (UTC); a day bucket may be cut by the range.")


class Change(BaseModel):
    """Per figure of the totals: the change from the comparison range to the range, in percent of
    the comparison's figure (visitors: of the estimates; rates and averages: of the rate, not points);
    null for a metric not asked for, or when the comparison's figure is 0 or null."""

    pageviews: float | None
    visitors: float | None
    visits: float | None
    views_per_visit: float | None
    bounce_rate: float | None
    visit_duration: float | None


Compare = Literal["previous_period", "year_over_year"]
"""What a range is compared with (serving_layer.comparison)."""


class TimeseriesComparison(AnswerMeta):
    """The same query over the comparison range, from its own snapshot, with its own coverage."""

    compare: Compare
    from_: datetime = Field(alias="from")
    to: datetime
    series: list[TimeseriesPoint]
    total: Totals
    exactness: dict[Metric, Exactness]


class TimeseriesResponse(AnswerMeta):
    model_config = _examples(
        {
            "dimension": "country",
            "site": "shop.example.com",
            "value": "DE",
            "from": "2026-11-20T00:00:00Z",
            "to": "2026-11-20T02:00:00Z",
            "granularity": "hour",
            "metrics": ["visitors", "pageviews"],
            "series": [
                {
                    "start": "2026-11-20T00:00:00Z",
                    "pageviews": 120,
                    "visitors": {"estimate": 41, "lower": 41, "upper": 41, "exact": True},
                    **NO_VISITS,
                },
                {
                    "start": "2026-11-20T01:00:00Z",
                    "pageviews": 97,
                    "visitors": {"estimate": 38, "lower": 38, "upper": 38, "exact": True},
                    **NO_VISITS,
                },
            ],
            "total": {
                "pageviews": 217,
                "visitors": {"estimate": 70.2, "lower": 68.0, "upper": 72.6, "exact": False},
                **NO_VISITS,
            },
            "exactness": {"visitors": HLL_EXAMPLE, "pageviews": EXACT_EXAMPLE},
            **META_EXAMPLE,
        },
        {
            "dimension": "site",
            "site": "shop.example.com",
            "value": "shop.example.com",
            "from": "2026-11-20T00:00:00Z",
            "to": "2026-11-21T00:00:00Z",
            "granularity": "day",
            "metrics": ["visits", "bounce_rate", "visit_duration"],
            "series": [
                {
                    "start": "2026-11-20T00:00:00Z",
                    "pageviews": None,
                    "visitors": None,
                    "visits": 412,
                    "views_per_visit": None,
                    "bounce_rate": 38.59,
                    "visit_duration": 187.204,
                }
            ],
            "total": {
                "pageviews": None,
                "visitors": None,
                "visits": 412,
                "views_per_visit": None,
                "bounce_rate": 38.59,
                "visit_duration": 187.204,
            },
            "exactness": {
                "visits": EXACT_EXAMPLE,
                "bounce_rate": EXACT_EXAMPLE,
                "visit_duration": EXACT_EXAMPLE,
            },
            **META_EXAMPLE,
        },
        {
            "dimension": "site",
            "site": "shop.example.com",
            "value": "shop.example.com",
            "from": "2026-11-16T00:00:00Z",
            "to": "2026-11-30T00:00:00Z",
            "granularity": "week",
            "metrics": ["pageviews"],
            "series": [
                {"start": "2026-11-16T00:00:00Z", "pageviews": 5120, "visitors": None, **NO_VISITS},
                {"start": "2026-11-23T00:00:00Z", "pageviews": 6400, "visitors": None, **NO_VISITS},
            ],
            "total": {"pageviews": 11520, "visitors": None, **NO_VISITS},
            "exactness": {"pageviews": EXACT_EXAMPLE},
            "comparison": {
                "compare": "previous_period",
                "from": "2026-11-02T00:00:00Z",
                "to": "2026-11-16T00:00:00Z",
                "series": [
                    {"start": "2026-11-02T00:00:00Z", "pageviews": 4800, "visitors": None, **NO_VISITS},
                    {"start": "2026-11-09T00:00:00Z", "pageviews": 4800, "visitors": None, **NO_VISITS},
                ],
                "total": {"pageviews": 9600, "visitors": None, **NO_VISITS},
                "exactness": {"pageviews": EXACT_EXAMPLE},
                **META_EXAMPLE,
            },
            "change": {"pageviews": 20.0, "visitors": None, **NO_VISITS},
            **META_EXAMPLE,
        },
    )

    dimension: str = Field(description="The dimension (GET /v1/dimensions lists them).")
    site: str | None = Field(description="The site, for per-site dimensions and site totals.")
    value: str = Field(description="The dimension's value: a URL, a site, a referrer host, a country...")
    from_: datetime = Field(alias="from")
    to: datetime
    granularity: Granularity
    metrics: list[Metric] = Field(description="The metrics answered, as asked (or the default).")
    series: list[TimeseriesPoint]
    total: Totals = Field(description="Over the whole range (visitors: the union, never a sum).")
    exactness: dict[Metric, Exactness] = Field(
        description="Per metric answered: whether all its figures are exact (page views always; "
        "visitors when every figure is marked exact; visit metrics unless a late view could not be "
        "merged into the realtime visits, then with the days concerned)."
    )
    comparison: TimeseriesComparison | None = Field(
        None, description="With `compare`: the same answer for the comparison range; null otherwise."
    )
    change: Change | None = Field(
        None, description="With `compare`: the totals' change from the comparison range, in percent."
    )


class BreakdownTotals(Figures):
    """Every value (of the site), not only the listed ones. Visitors and visit metrics: the site's,
    null without a site; page views: of every value."""


class BreakdownEntry(Figures):
    rank: int
    value: str


class BreakdownComparison(AnswerMeta):
    """The same breakdown over the comparison range (its own top values), with its own coverage."""

    compare: Compare
    from_: datetime = Field(alias="from")
    to: datetime
    entries: list[BreakdownEntry]
    totals: BreakdownTotals
    exactness: dict[Metric, Exactness]


class BreakdownResponse(AnswerMeta):
    model_config = _examples(
        {
            "dimension": "referrer",
            "site": "shop.example.com",
            "from": "2026-11-14T00:00:00Z",
            "to": "2026-11-21T00:00:00Z",
            "limit": 2,
            "metrics": ["visitors", "pageviews"],
            "entries": [
                {
                    "rank": 1,
                    "value": "(direct)",
                    "pageviews": 51234,
                    "visitors": {"estimate": 8120.4, "lower": 7990.0, "upper": 8252.9, "exact": False},
                    **NO_VISITS,
                },
                {
                    "rank": 2,
                    "value": "www.google.com",
                    "pageviews": 20410,
                    "visitors": {"estimate": 3122.0, "lower": 3070.1, "upper": 3175.3, "exact": False},
                    **NO_VISITS,
                },
            ],
            "totals": {
                "pageviews": 80112,
                "visitors": {"estimate": 10210.7, "lower": 10046.1, "upper": 10377.9, "exact": False},
                **NO_VISITS,
            },
            "exactness": {"visitors": HLL_EXAMPLE, "pageviews": EXACT_EXAMPLE},
            **META_EXAMPLE,
        },
        {
            "dimension": "entry_page",
            "site": "shop.example.com",
            "from": "2026-11-20T00:00:00Z",
            "to": "2026-11-21T00:00:00Z",
            "limit": 1,
            "metrics": ["visits", "bounce_rate"],
            "entries": [
                {
                    "rank": 1,
                    "value": "https://shop.example.com/",
                    "pageviews": None,
                    "visitors": None,
                    "visits": 2210,
                    "views_per_visit": None,
                    "bounce_rate": 41.18,
                    "visit_duration": None,
                }
            ],
            "totals": {
                "pageviews": None,
                "visitors": None,
                "visits": 5120,
                "views_per_visit": None,
                "bounce_rate": 39.02,
                "visit_duration": None,
            },
            "exactness": {
                "visits": {
                    "exact": False,
                    "reason": "a page view of 2026-11-20 arrived later than the speed layer's visit "
                    "horizon ...",
                    "days": ["2026-11-20"],
                },
                "bounce_rate": {
                    "exact": False,
                    "reason": "a page view of 2026-11-20 arrived later than the speed layer's visit "
                    "horizon ...",
                    "days": ["2026-11-20"],
                },
            },
            **META_EXAMPLE,
        },
    )

    dimension: str
    site: str | None
    from_: datetime = Field(alias="from", description="Start of the first whole UTC day ranked.")
    to: datetime = Field(description="End of the last whole UTC day ranked (the range rounded outwards).")
    limit: int
    metrics: list[Metric] = Field(description="The metrics answered, as asked (or the default).")
    entries: list[BreakdownEntry] = Field(
        description="By page views, descending (by visits for dimensions that count visits only: "
        "entry_page, exit_page); ties by value."
    )
    totals: BreakdownTotals
    exactness: dict[Metric, Exactness] = Field(
        description="Per metric answered: whether all its figures are exact (see /v1/timeseries)."
    )
    comparison: BreakdownComparison | None = Field(
        None,
        description="With `compare`: the breakdown of the comparison range (its own top values); "
        "null otherwise.",
    )
    change: Change | None = Field(
        None, description="With `compare`: the totals' change from the comparison range, in percent."
    )


class DimensionInfo(BaseModel):
    name: str
    description: str
    per_site: bool = Field(description="Keyed by (site, value): queries name the site.")
    examples: list[str]
    metrics: list[Metric] = Field(description="The metrics its queries may ask for (`metrics`).")
    ready: bool = Field(description="Answered exactly by the served generation (batch and realtime).")
    problem: str | None = Field(description="Why it is not ready yet.")


class DimensionsResponse(BaseModel):
    model_config = _examples(
        {
            "generation": 12,
            "dimensions": [
                {
                    "name": "country",
                    "description": "The visitor's country (ISO 3166 alpha-2), or (unknown).",
                    "per_site": True,
                    "examples": ["DE", "US", "(unknown)"],
                    "metrics": [
                        "visitors",
                        "visits",
                        "pageviews",
                        "views_per_visit",
                        "bounce_rate",
                        "visit_duration",
                    ],
                    "ready": True,
                    "problem": None,
                }
            ],
        }
    )

    generation: int = Field(description="The served generation the readiness refers to.")
    dimensions: list[DimensionInfo]


class NotReadyResponse(BaseModel):
    model_config = _examples(
        {
            "detail": "dimension 'language' is not ready: the served generation 12 has no batch views "
            "of it; the next batch run computes them",
            "dimension": "language",
        }
    )

    detail: str
    dimension: str


class AcceptedEvent(BaseModel):
    event_id: str
    partition: int
    offset: int


class EventsAccepted(BaseModel):
    model_config = _examples(
        {
            "accepted": 1,
            "events": [{"event_id": "e-42", "partition": 3, "offset": 1048576}],
            "token": "o1.eyIzIjoxMDQ4NTc3fQ",
        }
    )

    accepted: int
    events: list[AcceptedEvent]
    token: str = Field(
        description="Pass as `after` to a query to have it include these events (read your writes)."
    )


class ServedStatus(BaseModel):
    generation: int
    cut: dict[str, int]
    cut_at: datetime = Field(description="When the generation's cut was taken.")
    served_at: datetime | None
    batch_age_s: float = Field(description="Age of the batch views: seconds since the cut.")
    stalled: bool = Field(
        description="The cut is older than the `batch_stalled_after_s` setting: the batch layer has not "
        "published for that long (realtime views keep everything past the cut meanwhile)."
    )


class SpeedStatus(BaseModel):
    batch_id: int = Field(description="Last committed micro-batch (-1: none yet).")
    committed_offsets: dict[str, int]
    lag: dict[str, int] | None = Field(description="Partition -> events in the log not yet committed.")
    last_batch_at: datetime | None
    last_batch: dict[str, Any] | None = Field(description="The speed layer's report of its last micro-batch.")


class LogStatus(BaseModel):
    end_offsets: dict[str, int]
    dlq_records: int = Field(description="Records in the dead-letter topic (end minus start offsets).")


class RedisMemoryStatus(BaseModel):
    used_memory_bytes: int
    maxmemory_bytes: int | None = Field(description="Redis' maxmemory; null: no limit.")
    used_share: float | None = Field(description="used / maxmemory; null: no limit.")


class RetentionStatus(BaseModel):
    retention_s: float | None = Field(description="The events topic's retention; null: forever.")
    oldest_unabsorbed_age_s: float | None = Field(
        description="Age of the oldest record the batch layer has not absorbed (null: none)."
    )
    retention_used: float | None = Field(description="That age over the retention.")
    at_risk: bool = Field(description="At least 80% of the retention used: run the batch layer now.")


class GapStatus(BaseModel):
    offsets: dict[str, list[int]] = Field(description="Partition -> [from, to) offsets lost to retention.")
    accepted_by: str | None
    accepted_at: datetime | None
    records_survive_from: dict[str, datetime] = Field(
        description="Partition -> log-append time of the first record after the gap: events appended "
        "before it and missing from the answers may be among the lost ones."
    )


class MasterStatus(BaseModel):
    absorbed_until: dict[str, int] = Field(description="Partition -> offset absorbed up to.")
    gaps: list[GapStatus] = Field(description="Accepted gaps (python -m batch_layer accept-gap).")
    retention: RetentionStatus | None


class DeadLettersStatus(BaseModel):
    batch_absorb: dict[str, int] | None = Field(
        description="Field of the reason -> records the batch layer dead-lettered (committed master "
        "segments; each record once)."
    )
    speed_layer: dict[str, int] | None = Field(
        description="Field of the reason -> records the speed layer dead-lettered (committed micro-batches)."
    )
    in_dlq: dict[str, dict[str, int]] | None = Field(
        description="Source (ingest, batch-absorb, speed-layer) -> field of the reason -> records read "
        "from the dead-letter topic; a crash repeat (same key) counts once."
    )


class AuthStatus(BaseModel):
    mode: Literal["open", "keys"] = Field(
        description="`keys`: every /v1 route needs an API key; `open`: no key needed (loopback only)."
    )
    note: str


class StatusResponse(BaseModel):
    model_config = _examples(
        {
            "served": {
                "generation": 12,
                "cut": {"0": 2496775},
                "cut_at": "2026-11-21T06:00:00Z",
                "served_at": "2026-11-21T06:02:10Z",
                "batch_age_s": 412.5,
                "stalled": False,
            },
            "speed": {
                "batch_id": 5120,
                "committed_offsets": {"0": 2503120},
                "lag": {"0": 14},
                "last_batch_at": "2026-11-21T06:06:52Z",
                "last_batch": {"rows": 1200, "seconds": 0.31},
            },
            "log": {"end_offsets": {"0": 2503134}, "dlq_records": 17},
            "master": {
                "absorbed_until": {"0": 2496775},
                "gaps": [],
                "retention": {
                    "retention_s": 2592000.0,
                    "oldest_unabsorbed_age_s": 412.0,
                    "retention_used": 0.0002,
                    "at_risk": False,
                },
            },
            "redis": {"used_memory_bytes": 52428800, "maxmemory_bytes": None, "used_share": None},
            "repaired_pointer": False,
            "dead_letters": {
                "batch_absorb": {"url": 3, "ts": 1},
                "speed_layer": {"url": 3, "ts": 1},
                "in_dlq": {
                    "ingest": {"url": 5},
                    "batch-absorb": {"url": 3, "ts": 1},
                    "speed-layer": {"url": 3, "ts": 1},
                },
            },
            "errors": {},
            "auth": {"mode": "keys", "note": "API keys required (LAMBDA_API_AUTH=keys)"},
        }
    )

    served: ServedStatus | None
    speed: SpeedStatus | None
    log: LogStatus | None
    master: MasterStatus | None
    redis: RedisMemoryStatus | None
    repaired_pointer: bool = Field(
        description="Redis' served pointer was behind MongoDB's (a batch run died between the two writes "
        "of a switch) and this read brought it forward."
    )
    dead_letters: DeadLettersStatus
    errors: dict[str, str] = Field(description="Component -> why its part of the status is missing.")
    auth: AuthStatus = Field(description="Whether the API requires keys (LAMBDA_API_AUTH).")


class Check(BaseModel):
    ok: bool
    detail: str


class ReadyResponse(BaseModel):
    model_config = _examples(
        {
            "ready": True,
            "checks": {
                "mongodb": {"ok": True, "detail": "ok"},
                "redis": {"ok": True, "detail": "ok"},
                "kafka": {"ok": True, "detail": "ok"},
            },
        }
    )

    ready: bool = Field(
        description="MongoDB answers: queries can be served (Redis or Kafka down only degrade)."
    )
    checks: dict[str, Check]


class HealthResponse(BaseModel):
    status: Literal["ok"]


class ErrorResponse(BaseModel):
    model_config = _examples({"detail": "batch views unavailable: MongoDB: connection refused"})

    detail: str


class TimeoutResponse(BaseModel):
    model_config = _examples(
        {
            "detail": "after 2.00 s the served views do not cover: partition 3 below offset 1048577",
            "pending": {"3": 1048577},
        }
    )

    detail: str
    pending: dict[str, int] = Field(description="Partition -> end offset not yet covered.")


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorResponse(BaseModel):
    model_config = _examples(
        {"detail": [{"loc": ["query", "from"], "msg": "must be before to", "type": "value_error"}]}
    )

    detail: list[FieldError]
