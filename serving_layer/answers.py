"""What the engine answers: values per bucket and over the range, with the offsets they cover."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contract import utc
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
    lost_to_retention: tuple[dict[str, Any], ...] = ()
    """Offsets of the log deleted by retention before the batch layer absorbed them, accepted by an
    operator (``python -m batch_layer accept-gap``), each with ``events_before``: no event of a
    range that starts at or after it can be among them (the generation's stats)."""

    stamp: Hashable | None = field(default=None, compare=False, repr=False)
    """The realtime snapshot's stamp (serving_layer.model.RealtimeSnapshot.stamp): the answer is
    the same for every read with this stamp. Not part of the answer; None when partial."""

    def lost_for(self, start: datetime) -> list[dict[str, Any]]:
        """The accepted gaps an answer from ``start`` on may lack events of."""
        return [g for g in self.lost_to_retention if g["events_before"] is None or start < g["events_before"]]


def lost_of(gen: GenerationInfo) -> tuple[dict[str, Any], ...]:
    """A generation's accepted gaps, as its batch run recorded them (times in UTC, however the
    document store hands them back)."""
    return tuple(
        {**gap, "accepted_at": _utc(gap.get("accepted_at")), "events_before": _utc(gap["events_before"])}
        for gap in gen.stats.get("lost_to_retention") or ()
    )


def _utc(value: Any) -> datetime | None:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return utc.as_utc(value) if isinstance(value, datetime) else None


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


@dataclass(frozen=True, slots=True)
class Visits:
    """Visits (views.sessions) over some buckets: every field adds up across buckets and layers."""

    visits: int = 0
    bounces: int = 0
    duration_ms: int = 0
    views: int = 0

    def __add__(self, other: Visits) -> Visits:
        return Visits(
            self.visits + other.visits,
            self.bounces + other.bounces,
            self.duration_ms + other.duration_ms,
            self.views + other.views,
        )

    @property
    def bounce_rate(self) -> float | None:
        """Bounced visits in percent of visits (Plausible's ``bounce_rate``); None without visits."""
        return round(100.0 * self.bounces / self.visits, 2) if self.visits else None

    @property
    def visit_duration(self) -> float | None:
        """Average visit duration in seconds (Plausible's ``visit_duration``)."""
        return round(self.duration_ms / self.visits / 1000.0, 3) if self.visits else None

    @property
    def views_per_visit(self) -> float | None:
        return round(self.views / self.visits, 3) if self.visits else None


@dataclass(frozen=True)
class VisitsExactness:
    """Whether an answer's visit figures are exact; when not, why (the realtime part of a visit
    could not be merged exactly: speed_layer.visits)."""

    exact: bool = True
    reason: str | None = None
    days: tuple[str, ...] = ()


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
    visits: list[Visits] | None = None
    """With ``query.visits``: each entry's visits over the days."""
    total_visits: Visits | None = None
    """With ``query.visits`` and a site: the site's visits over the days."""
    visits_exactness: VisitsExactness = VisitsExactness()


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    start: datetime
    pageviews: int
    visitors: Distinct
    visits: Visits | None = None


@dataclass(frozen=True)
class SeriesAnswer:
    """Page views and unique visitors of one key, per bucket and over the range, one snapshot."""

    query: SeriesQuery
    series: list[SeriesPoint]
    pageviews: int
    visitors: Distinct
    coverage: Coverage
    visits: Visits | None = None
    """With ``query.visits``: over the range, and per point in ``series``."""
    visits_exactness: VisitsExactness = VisitsExactness()


@dataclass(frozen=True)
class ServingState:
    """What /v1/status reports of the serving side: the served generation and the speed layer."""

    generation: GenerationInfo
    commit: SpeedCommit | None
    """None when Redis could not be read."""
    speed_stats: dict[str, object] | None
    realtime_error: str | None
