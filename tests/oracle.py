"""A pure-Python recount of events: what every view must say, computed without Spark.

The strongest check the platform has: the batch views (and later the merged answers) are compared
against this recount of the very events that were produced.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from contract import PageView, site_of


@dataclass
class Bucket:
    pv: int = 0
    visitors: set[str] = field(default_factory=set)
    hours_pv: list[int] = field(default_factory=lambda: [0] * 24)
    hours_visitors: list[set[str]] = field(default_factory=lambda: [set() for _ in range(24)])


Recount = dict[str, dict[tuple[str, str], Bucket]]
"""view -> (key, day) -> bucket."""


def dedup(events: Iterable[PageView]) -> list[PageView]:
    """Each (event day, event_id) once, as the batch layer defines duplicates."""
    seen: set[tuple[str, str]] = set()
    out = []
    for e in events:
        ident = (e.ts.strftime("%Y-%m-%d"), e.event_id)
        if ident not in seen:
            seen.add(ident)
            out.append(e)
    return out


def recount(events: Iterable[PageView]) -> Recount:
    result: Recount = {"url_traffic": defaultdict(Bucket), "site_traffic": defaultdict(Bucket)}
    for e in dedup(events):
        day, hour = e.ts.strftime("%Y-%m-%d"), e.ts.hour
        for view, key in (("url_traffic", e.url), ("site_traffic", site_of(e.url))):
            b = result[view][(key, day)]
            b.pv += 1
            b.visitors.add(e.visitor_id)
            b.hours_pv[hour] += 1
            b.hours_visitors[hour].add(e.visitor_id)
    return {view: dict(buckets) for view, buckets in result.items()}
