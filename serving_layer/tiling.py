"""Range tiling: the coarsest buckets that cover a time range exactly.

Batch and realtime views keep, per key and UTC day, the day's value and its 24 hourly values. A
range ``[start, end)`` aligned to whole hours is answered from whole days where it covers them and
from single hours at its two edges (Marz's SuperWebAnalytics tiling): a 7-day range reads 7 or 8
days' documents and at most 46 hourly values, never 168 hours one by one. Series buckets (one per
hour or per day of the answer) are tiled the same way, so a day bucket cut by the range is the sum
(or sketch union) of its hours inside the range.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from config.memo import memo

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


class Granularity(StrEnum):
    HOUR = "hour"
    DAY = "day"
    WEEK = "week"
    """ISO 8601 weeks: Monday 00:00 UTC to the next Monday."""
    MONTH = "month"
    """Calendar months, UTC."""


@dataclass(frozen=True, slots=True)
class Tile:
    """One stored value: a whole UTC day (``hour`` None) or one hour of it."""

    day: str
    hour: int | None = None

    @property
    def start(self) -> datetime:
        return datetime.fromisoformat(self.day).replace(tzinfo=UTC, hour=self.hour or 0)

    @property
    def length(self) -> timedelta:
        return DAY if self.hour is None else HOUR


@dataclass(frozen=True, slots=True)
class Bucket:
    """One point of an answer's series: ``[start, end)``, made of the tiles that cover it."""

    start: datetime
    end: datetime
    tiles: tuple[Tile, ...]


def floor_day(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def ceil_day(t: datetime) -> datetime:
    """The end of the UTC day ``t`` lies in, or ``t`` itself at midnight."""
    day = floor_day(t)
    return day if day == t else day + DAY


def floor_week(t: datetime) -> datetime:
    """The start of ``t``'s ISO week: its Monday, 00:00."""
    return floor_day(t) - timedelta(days=t.weekday())


def floor_month(t: datetime) -> datetime:
    return floor_day(t).replace(day=1)


def next_month(t: datetime) -> datetime:
    """The first day of the month after ``t``'s, 00:00."""
    first = floor_month(t)
    return (
        first.replace(year=first.year + 1, month=1)
        if first.month == 12
        else first.replace(month=first.month + 1)
    )


def period_end(t: datetime, granularity: Granularity) -> datetime:
    """The end of the hour, UTC day, ISO week or month that ``t`` lies in."""
    if granularity is Granularity.HOUR:
        return t.replace(minute=0, second=0, microsecond=0) + HOUR
    if granularity is Granularity.DAY:
        return floor_day(t) + DAY
    if granularity is Granularity.WEEK:
        return floor_week(t) + 7 * DAY
    return next_month(t)


def is_hour_aligned(t: datetime) -> bool:
    return t.minute == 0 and t.second == 0 and t.microsecond == 0


@memo("api_tiling_cache_bytes")
def tile(start: datetime, end: datetime) -> tuple[Tile, ...]:
    """The coarsest tiles covering ``[start, end)`` exactly: whole days, hours at the edges.

    Both ends must be timezone-aware UTC and aligned to whole hours (the finest stored bucket);
    an empty or inverted range has no tiles. Cached: dashboards ask the same ranges again and
    again, and tiling a 7-day hourly range costs more than merging its values.
    """
    tiles: list[Tile] = []
    t = start
    while t < end:
        day = t.date().isoformat()
        if t.hour == 0 and t + DAY <= end:
            tiles.append(Tile(day))
            t += DAY
        else:
            tiles.append(Tile(day, t.hour))
            t += HOUR
    return tuple(tiles)


@memo("api_tiling_cache_bytes")
def buckets(start: datetime, end: datetime, granularity: Granularity) -> tuple[Bucket, ...]:
    """The series buckets of ``[start, end)``: every hour, or every UTC day, ISO week or calendar
    month, the first and last cut to the range (cached)."""
    out: list[Bucket] = []
    t = start
    while t < end:
        if granularity is Granularity.HOUR:
            nxt = t + HOUR
            out.append(Bucket(t, nxt, (Tile(t.date().isoformat(), t.hour),)))
        else:
            nxt = min(end, period_end(t, granularity))
            out.append(Bucket(t, nxt, tile(t, nxt)))
        t = nxt
    return tuple(out)


def days_covering(start: datetime, end: datetime) -> list[str]:
    """Every UTC day that ``[start, end)`` touches, in order."""
    out = []
    t = floor_day(start)
    while t < end:
        out.append(t.date().isoformat())
        t += DAY
    return out
