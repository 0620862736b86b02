"""A pure-Python reference sessioniser: what the visit metrics of every view must say, without Spark.

Written from the definition of a visit (issue 27), independently of both layers' code, so that the
property tests can hold the batch and the speed layer to it:

- A visit is a maximal run of one visitor's page views on one site (:func:`contract.site_of`),
  ordered by event time with ties broken by ``event_id``, in which each view is at most ``gap_s``
  after the previous one. A visit never crosses a UTC midnight: a view after midnight starts a new
  visit.
- It is credited to the UTC day and hour of its first view. Entry page = first view's page key, exit
  page = last view's, page views = its number of views, duration = last view's time minus the
  first's in integer milliseconds (``(last_us - first_us) // 1000``, microseconds since the epoch),
  bounced = exactly one view. Its referrer source, country, device, UTM values and channel are its
  first view's.
- Duplicates are removed first, by :func:`tests.oracle.dedup`.

Stored metrics per (view, key, day) and per hour of the day: ``vi`` visits, ``bo`` bounces, ``du``
total duration in ms, ``vv`` page views in visits. The views ``site``, ``referrer``, ``country``,
``device``, ``utm_*`` and ``channel`` key a visit by its first view's stored key
(:data:`tests.oracle.DIMENSION_KEYS`); ``entry_page`` and ``exit_page`` by the first and the last
view's page key. ``page`` carries none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from contract import PageView, site_of
from tests.oracle import DIMENSION_KEYS, dedup

DEFAULT_GAP_S = 1800
"""The default of LAMBDA_SESSION_GAP_S."""

METRICS = ("vi", "bo", "du", "vv")
"""The visit metrics of a bucket: visits, bounces, total duration (ms), page views in visits."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)


def epoch_us(ts: datetime) -> int:
    """Microseconds since the epoch, exactly (no float on the way)."""
    return (ts - _EPOCH) // _ONE_US


def _zero_hours() -> list[dict[str, int]]:
    return [dict.fromkeys(METRICS, 0) for _ in range(24)]


def _order(e: PageView) -> tuple[int, str]:
    return epoch_us(e.ts), e.event_id


@dataclass(frozen=True)
class Visit:
    """One visit: its views in (ts, event_id) order."""

    visitor_id: str
    site: str
    views: tuple[PageView, ...]

    @property
    def first(self) -> PageView:
        return self.views[0]

    @property
    def last(self) -> PageView:
        return self.views[-1]

    @property
    def day(self) -> str:
        return self.first.ts.strftime("%Y-%m-%d")

    @property
    def hour(self) -> int:
        return self.first.ts.hour

    @property
    def pageviews(self) -> int:
        return len(self.views)

    @property
    def duration_ms(self) -> int:
        return (epoch_us(self.last.ts) - epoch_us(self.first.ts)) // 1000

    @property
    def bounced(self) -> bool:
        return len(self.views) == 1

    def __str__(self) -> str:
        ids = ",".join(e.event_id for e in self.views)
        return (
            f"visit {self.visitor_id}@{self.site} {self.first.ts.isoformat()}..{self.last.ts.isoformat()}"
            f" [{ids}] entry {self.first.url} exit {self.last.url}"
        )


def sessionise(events: Iterable[PageView], gap_s: int = DEFAULT_GAP_S) -> list[Visit]:
    """The visits of ``events`` (deduplicated here by :func:`tests.oracle.dedup`), in the order of
    (visitor, site, first view's time, first view's id). Arrival order does not matter."""
    gap_us = gap_s * 1_000_000
    runs: dict[tuple[str, str, str], list[PageView]] = defaultdict(list)
    for e in dedup(events):
        runs[(e.visitor_id, site_of(e.url), e.ts.strftime("%Y-%m-%d"))].append(e)
    visits: list[Visit] = []
    for (visitor, site, _day), views in runs.items():
        views.sort(key=_order)
        current = [views[0]]
        for e in views[1:]:
            if epoch_us(e.ts) - epoch_us(current[-1].ts) <= gap_us:
                current.append(e)
            else:
                visits.append(Visit(visitor, site, tuple(current)))
                current = [e]
        visits.append(Visit(visitor, site, tuple(current)))
    visits.sort(key=lambda v: (v.visitor_id, v.site, *_order(v.first)))
    return visits


@dataclass
class VisitBucket:
    """The visit metrics of one (view, key, day): the day's totals and each hour's values."""

    vi: int = 0
    bo: int = 0
    du: int = 0
    vv: int = 0
    hours: list[dict[str, int]] = field(default_factory=_zero_hours)

    def add(self, visit: Visit) -> None:
        values = {"vi": 1, "bo": int(visit.bounced), "du": visit.duration_ms, "vv": visit.pageviews}
        for name, value in values.items():
            setattr(self, name, getattr(self, name) + value)
            self.hours[visit.hour][name] += value

    def totals(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in METRICS}


VisitRecount = dict[str, dict[tuple[str, str], VisitBucket]]
"""view -> (key, day) -> visit bucket."""


def _first_view(key: Callable[[PageView], str]) -> Callable[[Visit], str]:
    return lambda v: key(v.first)


VISIT_KEYS: dict[str, Callable[[Visit], str]] = {
    **{name: _first_view(key) for name, key in DIMENSION_KEYS.items() if name != "page"},
    "entry_page": lambda v: DIMENSION_KEYS["page"](v.first),
    "exit_page": lambda v: DIMENSION_KEYS["page"](v.last),
}
"""The views carrying visit metrics and a visit's key in each: every dimension but the page, keyed
by the visit's first view, and the entry and exit pages."""


def recount_visits(visits: Iterable[Visit]) -> VisitRecount:
    """Every visit view's buckets of already built ``visits``."""
    result: VisitRecount = {view: {} for view in VISIT_KEYS}
    for visit in visits:
        for view, key_of in VISIT_KEYS.items():
            buckets = result[view]
            ident = (key_of(visit), visit.day)
            if ident not in buckets:
                buckets[ident] = VisitBucket()
            buckets[ident].add(visit)
    return result


def visit_recount(events: Iterable[PageView], gap_s: int = DEFAULT_GAP_S) -> VisitRecount:
    """view -> (key, day) -> visit metrics of the visits of ``events`` (deduplicated here)."""
    return recount_visits(sessionise(events, gap_s))


def _value(row: Any, name: str) -> int | None:
    """A row's (a Spark Row or a mapping) field, None when absent or null."""
    try:
        value = row[name]
    except (KeyError, ValueError, IndexError):
        return None
    return None if value is None else int(value)


def add_row(buckets: VisitRecount, row: Any, sign: int = 1) -> None:
    """Add a view row's visit metrics (a missing or null value read as 0), times ``sign``, into
    ``buckets`` (rows of views it has no entry for are left out)."""
    view = row["view"]
    if view not in buckets:
        return
    ident = (row["key"], row["day"])
    if ident not in buckets[view]:
        buckets[view][ident] = VisitBucket()
    b = buckets[view][ident]
    for name in METRICS:
        setattr(b, name, getattr(b, name) + sign * (_value(row, name) or 0))
    for h in row["hours"] or ():
        for name in METRICS:
            b.hours[int(h["hour"])][name] += sign * (_value(h, name) or 0)


def sum_rows(rows: Iterable[Any], into: VisitRecount | None = None) -> VisitRecount:
    """The visit metrics of view rows summed per (view, key, day): the realtime part is the sum of
    every micro-batch's rows (deltas, retractions negative)."""
    buckets: VisitRecount = {view: {} for view in VISIT_KEYS} if into is None else into
    for row in rows:
        add_row(buckets, row)
    return buckets


def combine(*parts: VisitRecount) -> VisitRecount:
    """The bucket-wise sum of recounts (batch part + realtime part)."""
    total: VisitRecount = {view: {} for view in VISIT_KEYS}
    for part in parts:
        for view, buckets in part.items():
            for ident, b in buckets.items():
                t = total.setdefault(view, {}).setdefault(ident, VisitBucket())
                for name in METRICS:
                    setattr(t, name, getattr(t, name) + getattr(b, name))
                    for hour in range(24):
                        t.hours[hour][name] += b.hours[hour][name]
    return total


def compare_recounts(expected: VisitRecount, got: VisitRecount) -> list[str]:
    """The differences between two recounts of the views of ``expected``, one readable line per
    bucket and level (day or hour); a bucket absent on one side equals one whose metrics are all 0
    (a referrer with page views but no visit starting from it may or may not store zeros, and a
    realtime bucket whose visits were all retracted sums to zeros)."""
    problems: list[str] = []
    zero = VisitBucket()
    for view in expected:
        have_view = got.get(view, {})
        for ident in sorted(set(expected[view]) | set(have_view)):
            want, have = expected[view].get(ident, zero), have_view.get(ident, zero)
            if want.totals() != have.totals():
                problems.append(f"{view} {ident}: day {_diff(want.totals(), have.totals())}")
            for hour in range(24):
                if want.hours[hour] != have.hours[hour]:
                    problems.append(
                        f"{view} {ident}: hour {hour} {_diff(want.hours[hour], have.hours[hour])}"
                    )
    return problems


def compare_visits(expected: VisitRecount, rows: Iterable[Any], *, strict: bool = True) -> list[str]:
    """The differences between a recount and view rows (Spark Rows or mappings with ``view``,
    ``key``, ``day``, ``vi``..``vv`` and ``hours``: one row per (view, key, day), as the batch
    layer's), one readable line each; empty when they agree (:func:`compare_recounts`).

    With ``strict`` the rows must also keep the shape of the definition: no visit metric on
    ``page`` rows (null), and ``pv`` 0 on ``entry_page`` and ``exit_page`` rows."""
    problems: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    got: VisitRecount = {view: {} for view in expected}
    for row in rows:
        view, ident = row["view"], (row["key"], row["day"])
        if strict and view == "page":
            stored = [name for name in METRICS if _value(row, name) is not None]
            stored += [
                f"hour {h['hour']} {n}"
                for h in row["hours"] or ()
                for n in METRICS
                if _value(h, n) is not None
            ]
            if stored:
                problems.append(f"page {ident}: carries visit metrics {stored}")
        if strict and view in ("entry_page", "exit_page") and _value(row, "pv"):
            problems.append(f"{view} {ident}: pv {row['pv']}, expected 0")
        if view in got and (view, *ident) in seen:
            problems.append(f"{view} {ident}: more than one row")
        seen.add((view, *ident))
        add_row(got, row)
    return problems + compare_recounts(expected, got)


def _diff(want: Mapping[str, int], have: Mapping[str, int]) -> str:
    return ", ".join(f"{n} expected {want[n]} got {have[n]}" for n in METRICS if want[n] != have[n])


def describe(visits: Sequence[Visit]) -> str:
    """The visits one per line: for a failing example's report."""
    return "\n".join(str(v) for v in visits)
