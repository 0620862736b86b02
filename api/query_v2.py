"""POST /v2/query: its request body as documented, its answer's model (the one definition of its
shape) and the answer rendered to that shape.

The body is parsed by hand (serving_layer.filters.parse: bounds, aliases, each error naming its
parameter); :class:`QueryV2Request` describes it in the OpenAPI document. The answer has Plausible's
Stats API v2 shape (``results``, ``meta``, ``query``) plus what every answer of this API says: the
generation, ``exact`` per metric, ``partial``, ``missing`` and ``covers``, and the ``path`` that
answered it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api import render
from api.schemas import META_EXAMPLE, AnswerMeta
from serving_layer.filters.model import MAX_LIMIT, MAX_OFFSET, QueryAnswer

REQUEST_EXAMPLE: dict[str, Any] = {
    "site_id": "shop.example.com",
    "date_range": "7d",
    "metrics": ["visitors", "pageviews"],
    "dimensions": ["visit:source"],
    "filters": [
        ["is", "visit:country", ["DE", "FR"]],
        ["contains", "event:page", ["/blog/"]],
    ],
    "order_by": [["visitors", "desc"]],
    "pagination": {"limit": 10, "offset": 0},
}


class Pagination(BaseModel):
    limit: int = Field(1000, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


class QueryV2Request(BaseModel):
    """A query of Plausible's Stats API v2 shape."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [REQUEST_EXAMPLE]})

    site_id: str = Field(max_length=300, description="The site (host, or origin).")
    date_range: Literal["day", "7d", "30d", "month"] | list[str] = Field(
        description="`day` (today, UTC), `7d` / `30d` (the days ending today, today included), `month` "
        '(this calendar month to today), or `["YYYY-MM-DD", "YYYY-MM-DD"]` (both included).'
    )
    metrics: list[
        Literal["pageviews", "visitors", "visits", "views_per_visit", "bounce_rate", "visit_duration"]
    ] = Field(
        description="`pageviews` and `visitors` (exact under any filter), and the visit metrics of the "
        "visits whose first view's values (and entry and exit page) pass the filters; a visit metric "
        "with `event:page` is a 422 (visits keep their entry and exit page, not every page)."
    )
    dimensions: list[str] = Field(
        default_factory=list,
        description="Up to 3 of `event:page`, `visit:entry_page`, `visit:exit_page` (then every figure is "
        "the visits'), `visit:source` (the referrer), `visit:country`, "
        "`visit:device`, `visit:channel`, `visit:utm_source`, `visit:utm_medium`, `visit:utm_campaign` "
        "(or the table's names: `page`, `referrer`, ...), `time:day`, `time:hour`.",
    )
    filters: list[list[Any]] = Field(
        default_factory=list,
        description="Their `and`: `[op, dimension, [values...]]` with op `is`, `is_not`, `contains`, "
        '`contains_not`, `matches`, `matches_not` (RE2), or `["and", [...]]`, `["or", [...]]`, '
        '`["not", filter]`; at most 50 conditions, nested at most 5 deep, 100 values each.',
    )
    order_by: list[list[str]] | None = Field(
        None,
        description='`[[metric or dimension, "asc" | "desc"], ...]`. Default: the time dimension '
        "ascending, else page views descending; then the dimensions ascending.",
    )
    pagination: Pagination | None = None


class QueryV2Row(BaseModel):
    metrics: list[int | float | None] = Field(description="The metrics, in the order asked.")
    dimensions: list[str] = Field(description="The group's values, in the order of the dimensions.")


class QueryV2Meta(BaseModel):
    total_rows: int | None = Field(description="Groups of the answer before the page was cut.")
    scanned_rows: int | None = Field(
        description="The filter table's rows the scan could read (its cost estimate); null on the views path."
    )
    notes: list[str] = Field(description="Why a figure is not exact, when one is not.")


ANSWER_EXAMPLE: dict[str, Any] = {
    "results": [
        {"metrics": [412, 1380], "dimensions": ["news.ycombinator.com"]},
        {"metrics": [97, 240], "dimensions": ["(none)"]},
    ],
    "meta": {"total_rows": 2, "scanned_rows": 182_340, "notes": []},
    "query": {**REQUEST_EXAMPLE, "date_range": ["2026-11-20", "2026-11-26"]},
    "path": "filter_table",
    "generation": 12,
    "exact": {"visitors": True, "pageviews": True},
    **META_EXAMPLE,
}


class QueryV2Response(AnswerMeta):
    model_config = ConfigDict(json_schema_extra={"examples": [ANSWER_EXAMPLE]})

    results: list[QueryV2Row]
    meta: QueryV2Meta
    query: dict[str, Any] = Field(description="The query as answered: aliases resolved, defaults in.")
    path: Literal["views", "filter_table"] = Field(
        description="`views`: today's views answered it (series and breakdowns); `filter_table`: a scan "
        "of the filter table (combined filters)."
    )
    generation: int = Field(description="The served generation the whole answer comes from.")
    exact: dict[str, bool] = Field(
        description="Per metric: exact (true), or not: visitors of the views path are sketch unions, and "
        "visit figures of a day the speed layer flagged (a view later than its horizon) may be off."
    )


def query_v2(a: QueryAnswer) -> dict[str, Any]:
    start = a.query.start
    return {
        "results": [{"metrics": list(r.metrics), "dimensions": list(r.dimensions)} for r in a.results],
        "meta": {"total_rows": a.total_rows, "scanned_rows": a.scanned_rows, "notes": list(a.notes)},
        "query": a.query.echo,
        "path": a.path,
        "generation": a.coverage.generation,
        "exact": a.exact,
        **render._meta(a.coverage, start),
    }
