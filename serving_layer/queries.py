"""What the engine is asked: a key's series, a view's top keys, read-your-writes; and the range check.

Ranges are ``[start, end)`` in UTC whole hours (the finest bucket); :func:`check_range` says which
parameter is wrong when a range cannot be answered exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

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


@dataclass(frozen=True)
class ReadAfter:
    """Answer only from a snapshot that includes these end offsets; wait up to ``wait_s``."""

    offsets: Offsets
    wait_s: float


def check_range(start: datetime, end: datetime, max_days: int) -> None:
    """Raise InvalidQuery naming the parameter if ``[start, end)`` cannot be answered exactly."""
    for param, t in (("from", start), ("to", end)):
        if t.tzinfo is None or t.utcoffset() != timedelta(0):
            raise InvalidQuery(param, "must be in UTC")
        if not is_hour_aligned(t):
            raise InvalidQuery(param, "must be a whole hour (minutes and seconds 0): the finest bucket")
    if start >= end:
        raise InvalidQuery("from", "must be before to")
    if end - start > timedelta(days=max_days):
        raise InvalidQuery("to", f"the range exceeds the maximum of {max_days} days")
