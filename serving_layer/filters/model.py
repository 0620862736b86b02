"""What a ``POST /v2/query`` asks and answers, parsed: no HTTP and no SQL here.

A filter is a tree: a condition on one dimension (:class:`Condition`), or ``and``/``or`` of
filters, or ``not`` of one. The query's ``filters`` list is the ``and`` of its items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal

from serving_layer.answers import Coverage
from views.filter_table import DIMENSIONS, VISIT_PAGES

Op = Literal["is", "is_not", "contains", "contains_not", "matches", "matches_not"]
OPS: tuple[Op, ...] = ("is", "is_not", "contains", "contains_not", "matches", "matches_not")
NEGATED: dict[str, str] = {"is_not": "is", "contains_not": "contains", "matches_not": "matches"}

TIME_DAY = "time:day"
TIME_HOUR = "time:hour"
TIME_DIMENSIONS = (TIME_DAY, TIME_HOUR)

ALIASES: dict[str, str] = {
    "event:page": "page",
    "visit:source": "referrer",
    "visit:referrer": "referrer",
    "visit:country": "country",
    "visit:device": "device",
    "visit:channel": "channel",
    "visit:utm_source": "utm_source",
    "visit:utm_medium": "utm_medium",
    "visit:utm_campaign": "utm_campaign",
    "visit:entry_page": "entry_page",
    "visit:exit_page": "exit_page",
    **{name: name for name in (*DIMENSIONS, *VISIT_PAGES)},
}
"""Plausible's names of the filter table's dimensions, and the table's own names, to its columns."""

PAGEVIEWS = "pageviews"
VISITORS = "visitors"
TABLE_METRICS = (PAGEVIEWS, VISITORS)
"""What the filter table's page-view rows answer, both exactly."""
VISIT_METRICS = ("visits", "views_per_visit", "bounce_rate", "visit_duration")
"""What its visit rows answer (views.sessions: a visit's values are its first view's)."""
METRICS = (*TABLE_METRICS, *VISIT_METRICS)

MAX_DEPTH = 5
"""Deepest nesting of ``and``/``or``/``not``."""
MAX_CONDITIONS = 50
"""Most conditions in one query's filter tree."""
MAX_VALUES = 100
"""Most values of one condition."""
MAX_VALUE_CHARS = 4096
MAX_PATTERN_CHARS = 1024
"""Longest value of ``matches``: an RE2 pattern (linear time in the text it matches)."""
MAX_DIMENSIONS = 3
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_OFFSET = 100_000


@dataclass(frozen=True)
class Condition:
    op: Op
    dimension: str
    """The filter table's column (an alias resolved)."""
    values: tuple[str, ...]


@dataclass(frozen=True)
class And:
    items: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Filter, ...]


@dataclass(frozen=True)
class Not:
    item: Filter


Filter = Condition | And | Or | Not


def filtered_dimensions(f: Filter | None) -> set[str]:
    """The dimensions the conditions of ``f`` name."""
    if f is None:
        return set()
    if isinstance(f, Condition):
        return {f.dimension}
    if isinstance(f, Not):
        return filtered_dimensions(f.item)
    return {d for item in f.items for d in filtered_dimensions(item)}


@dataclass(frozen=True)
class FilterQuery:
    site: str
    first_day: date
    last_day: date
    """The UTC days of the range, both included."""
    metrics: tuple[str, ...]
    dimensions: tuple[str, ...]
    """Filter-table columns or ``time:day`` / ``time:hour``, in the order asked."""
    filter: Filter | None
    """The ``and`` of the query's filters (None: no filter)."""
    order_by: tuple[tuple[str, Literal["asc", "desc"]], ...]
    """Metric or dimension names with a direction; never empty (defaults filled in)."""
    limit: int
    offset: int
    echo: dict[str, Any] = field(default_factory=dict, compare=False)
    """The query as answered, for the answer's ``query`` (aliases resolved, defaults filled in)."""
    first_hour: int = 0
    """The first UTC hour of ``first_day`` in the range (a range of datetimes: whole hours)."""
    last_hour: int = 23
    """The last UTC hour of ``last_day`` in the range, included."""

    @property
    def start(self) -> datetime:
        """The range's first instant (UTC)."""
        return datetime.combine(self.first_day, time(self.first_hour), UTC)

    @property
    def end(self) -> datetime:
        """The instant right after the range (UTC)."""
        return datetime.combine(self.last_day, time(self.last_hour), UTC) + timedelta(hours=1)

    @property
    def per_visit(self) -> bool:
        """Whether the query names a visit's entry or exit page (a dimension or a filter): then
        every figure is the visits' (the page views of those visits, the visitors who made them)."""
        named = {*self.dimensions, *filtered_dimensions(self.filter)}
        return any(name in VISIT_PAGES for name in named)

    @property
    def visits(self) -> bool:
        """Whether a visit metric is asked or ordered by."""
        return any(m in VISIT_METRICS for m in (*self.metrics, *(n for n, _ in self.order_by)))

    @property
    def days(self) -> list[str]:
        n = (self.last_day - self.first_day).days + 1
        return [(self.first_day + timedelta(days=i)).isoformat() for i in range(n)]


@dataclass(frozen=True)
class Row:
    metrics: tuple[int | float | None, ...]
    dimensions: tuple[str, ...]
    pageviews: int = 0
    """The group's page views, asked or not (what the default order ranks by)."""


@dataclass(frozen=True)
class QueryAnswer:
    query: FilterQuery
    path: Literal["views", "filter_table"]
    results: list[Row]
    coverage: Coverage
    exact: dict[str, bool]
    total_rows: int | None = None
    """Groups before the page was cut (None: not counted)."""
    notes: tuple[str, ...] = ()
    """Why a figure is not exact, when one is not."""
    scanned_rows: int | None = None
    """The filter table's rows the scan read at most (the cost estimate); None on the views path."""
