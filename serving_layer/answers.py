"""What the engine answers: values per bucket and over the range, with the offsets they cover."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from serving_layer.model import GenerationInfo, Offsets, SpeedCommit
from serving_layer.queries import SeriesQuery, TopQuery


@dataclass(frozen=True)
class Coverage:
    """Which events an answer includes: every event of the log below ``batch_offsets`` (the
    generation's cut, taken at ``batch_as_of``) and, unless realtime is missing, every event below
    ``realtime_offsets`` (the speed layer's last commit)."""

    generation: int
    batch_offsets: Offsets
    batch_as_of: datetime
    realtime_offsets: Offsets | None
    partial: bool
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PageviewPoint:
    start: datetime
    pageviews: int


@dataclass(frozen=True, slots=True)
class Distinct:
    """Unique visitors: exact (from exact batch counts alone) or an HLL estimate with 95% bounds."""

    estimate: float
    lower: float
    upper: float
    exact: bool


@dataclass(frozen=True)
class PageviewsAnswer:
    query: SeriesQuery
    series: list[PageviewPoint]
    total: int
    coverage: Coverage


@dataclass(frozen=True)
class UniqueVisitorsAnswer:
    query: SeriesQuery
    series: list[tuple[datetime, Distinct]]
    total: Distinct
    coverage: Coverage


@dataclass(frozen=True)
class TopAnswer:
    query: TopQuery
    start: datetime
    end: datetime
    """The whole UTC days actually ranked (the query's range rounded outwards)."""
    entries: list[tuple[str, int]]
    coverage: Coverage
    visitors: list[Distinct | None] | None = None
    """With ``query.visitors``: each entry's unique visitors over the days."""
    total_pageviews: int = 0
    """Page views of every key in scope (not only the listed ones)."""
    total_visitors: Distinct | None = None
    """With ``query.visitors`` and a site: the site's unique visitors over the days."""


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    start: datetime
    pageviews: int
    visitors: Distinct


@dataclass(frozen=True)
class SeriesAnswer:
    """Page views and unique visitors of one key, per bucket and over the range, one snapshot."""

    query: SeriesQuery
    series: list[SeriesPoint]
    pageviews: int
    visitors: Distinct
    coverage: Coverage


@dataclass(frozen=True)
class ServingState:
    """What /v1/status reports of the serving side: the served generation and the speed layer."""

    generation: GenerationInfo
    commit: SpeedCommit | None
    """None when Redis could not be read."""
    speed_stats: dict[str, object] | None
    realtime_error: str | None
