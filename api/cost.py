"""The cost model of a query: how many stored values (buckets x keys) answering it reads, known
before anything is read; above ``LAMBDA_API_MAX_COST`` the query is refused with a 422 that names
the limit and the cost asked.

- A series (pageviews, unique visitors, timeseries) reads, per day of its range, one batch
  document and the realtime fields of its tiles: the series' buckets' tiles plus, for unique
  visitors, the tiles of the whole range. A 92-day hourly series costs about 2,400.
- A ranking (top URLs) reads one batch ranking and one realtime ranking per day.
- A breakdown with visitors also reads each listed key's sketch on each day, and the site's:
  ``days x (limit + 2)`` more. ``limit=1000`` over 92 days costs about 92,000.
- A query with ``compare`` (api.compare) reads its comparison range too: it costs what the two
  queries cost together, and is refused as a whole above the limit.
- Current visitors read, per minute of the window, a sketch and a set of at most
  ``current_visitors_exact_limit`` visitor ids: ``(minutes + 1) x (limit + 1)``. The defaults'
  longest window (30 minutes, sets of 100) costs 3,131.
"""

from __future__ import annotations

from datetime import datetime

from config.memo import memo
from serving_layer import SeriesQuery, TopQuery
from serving_layer.tiling import Granularity, buckets, days_covering, tile


class TooCostly(Exception):
    def __init__(self, cost: int, limit: int, param: str, location: str = "query") -> None:
        super().__init__(f"cost {cost} above {limit}")
        self.cost, self.limit, self.param, self.location = cost, limit, param, location

    def detail(self) -> list[dict[str, object]]:
        return [
            {
                "loc": [self.location, self.param],
                "msg": f"the query would read {self.cost:,} stored values (buckets x keys), above the "
                f"limit of {self.limit:,} per request (LAMBDA_API_MAX_COST): shorten the range, ask "
                "for days instead of hours or a lower limit",
                "type": "cost_limit",
                "ctx": {"cost": self.cost, "limit": self.limit},
            }
        ]


def series_cost(q: SeriesQuery) -> int:
    return _series_cost(q.start, q.end, q.granularity)


@memo("api_tiling_cache_bytes")
def _series_cost(start: datetime, end: datetime, granularity: Granularity) -> int:
    """A series' cost depends on its range and buckets alone: computed once per range, with the
    tilings it counts (a 30-day range's days and buckets cost more to count than a cached answer)."""
    series_tiles = sum(len(b.tiles) for b in buckets(start, end, granularity))
    return len(days_covering(start, end)) + series_tiles + len(tile(start, end))


def top_cost(q: TopQuery) -> int:
    days = len(days_covering(q.start, q.end))
    return 2 * days + (days * (q.limit + 2) if q.visitors else 0)


def current_visitors_cost(minutes: int, exact_limit: int) -> int:
    return (minutes + 1) * (exact_limit + 1)


def check(cost: int, limit: int, param: str, location: str = "query") -> None:
    if cost > limit:
        raise TooCostly(cost, limit, param, location)
