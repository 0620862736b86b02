"""What the engine is asked: a key's series, a view's top keys, read-your-writes; and the range check.

Ranges are ``[start, end)`` in UTC whole hours (the finest bucket); :func:`check_range` says which
parameter is wrong when a range cannot be answered exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from serving_layer.model import InvalidQuery, Offsets
from serving_layer.tiling import Granularity, is_hour_aligned

URL_VIEW = "page"
SITE_VIEW = "site"


@dataclass(frozen=True)
class SeriesQuery:
    """A key's values over ``[start, end)`` (UTC, whole hours), one point per hour or day."""

    view: str
    key: str
    start: datetime
    end: datetime
    granularity: Granularity
    visits: bool = False
    """Also the visits (views.sessions): visits, bounces, duration, views in visits."""


@dataclass(frozen=True)
class TopQuery:
    """The ``limit`` keys with the most page views over the UTC days ``[start, end)`` touches,
    of one site (``site``) or of all; with ``visitors``, each key's unique visitors too."""

    view: str
    start: datetime
    end: datetime
    limit: int
    site: str | None = None
    visitors: bool = False
    visits: bool = False
    """Also each key's visits over the days (and the site's, with ``site``)."""


@dataclass(frozen=True)
class ReadAfter:
    """Answer only from a snapshot that includes these end offsets; wait up to ``wait_s``."""

    offsets: Offsets
    wait_s: float


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""A range must lie between these: the log's times (Kafka's epoch milliseconds) do, and the bucket
arithmetic around a range (a day before, a day after) must stay inside what ``datetime`` holds."""


def bounded(param: str, t: datetime) -> datetime:
    """``t`` if it lies between EARLIEST and LATEST; InvalidQuery naming ``param`` otherwise."""
    if t.tzinfo is not None and not EARLIEST <= t <= LATEST:
        raise InvalidQuery(param, f"must be between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return t


def check_range(start: datetime, end: datetime, max_days: int) -> None:
    """Raise InvalidQuery naming the parameter if ``[start, end)`` cannot be answered exactly."""
    for param, t in (("from", start), ("to", end)):
        if t.tzinfo is None or t.utcoffset() != timedelta(0):
            raise InvalidQuery(param, "must be in UTC")
        bounded(param, t)
        if not is_hour_aligned(t):
            raise InvalidQuery(param, "must be a whole hour (minutes and seconds 0): the finest bucket")
    if start >= end:
        raise InvalidQuery("from", "must be before to")
    if end - start > timedelta(days=max_days):
        raise InvalidQuery("to", f"the range exceeds the maximum of {max_days} days")
