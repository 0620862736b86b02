"""Hypothesis strategies for visit logs: small logs (tens of events) full of the hard cases.

A log is a list of page views in arrival order. It is built from a few *chains*: runs of one
visitor's views on one site, each step after the previous one drawn from the boundary cases of the
session gap (0 for ties, the gap exactly, one microsecond more, twice the gap, ...), starting near
a UTC midnight so that chains cross it. Then:

- **late views that merge visits**: where a step is longer than the gap, a *bridge* view may be
  added inside it; it arrives late (after views later than itself), and joins the two visits when
  it lies within the gap of both;
- **late views that change a visit's ends**: any view may arrive late, so a visit's entry or exit
  page (and its first view's referrer, country and device) can change after views were seen;
- **ties**: equal times in one chain and across chains, with event ids whose string order is not
  the order they were drawn in (``e10`` < ``e9``);
- **duplicates**: exact copies of some events, arriving after their original;
- **visitors on two sites**: few visitors and two sites, so chains share a visitor across sites
  (and interleave on one site, merging or splitting each other's visits).

:class:`VisitLog` keeps which events arrived late, for the speed layer's tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from hypothesis import strategies as st

from contract import PageView, TimeBounds

GAP_S = 1800
GAP_US = GAP_S * 1_000_000
HOUR_US = 3600 * 1_000_000

MIDNIGHT = datetime(2026, 3, 2, tzinfo=UTC)
"""The midnight the chains start around (the days 2026-03-01 and 2026-03-02)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIDNIGHT_US = (MIDNIGHT - _EPOCH) // timedelta(microseconds=1)

VISITORS = ("v1", "v2", "v3")
SITES = ("a.example.com", "b.example.com")
PATHS = ("/", "/x", "/y?q=1")
EXTERNAL_REFERRERS = (None, "https://www.google.com/search", "https://news.example.org/")
COUNTRIES = (None, "DE", "US")
AGENTS = (
    None,
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)",
)

STEPS_US = (0, 1, 1_000_000, GAP_US - 1, GAP_US, GAP_US + 1, 2 * GAP_US, 2 * GAP_US + 1, 3 * GAP_US)
"""Steps between a chain's views: ties, the gap's edges, and gaps a bridge view can (2 gaps) or
cannot (2 gaps + 1 µs) close."""
START_OFFSETS_US = (-GAP_US - 1, -GAP_US, -GAP_US // 2, -1_000_000, -1, 0, 1, GAP_US)
"""Chain starts relative to MIDNIGHT."""

_WIDE = TimeBounds(max_future=timedelta.max / 2, max_past=timedelta.max / 2)


def page_view(
    event_id: str,
    ts: datetime,
    visitor_id: str = "v1",
    url: str = "https://a.example.com/",
    referrer: str | None = None,
    user_agent: str | None = None,
    country: str | None = None,
) -> PageView:
    """A valid page view at any time (the contract's bounds around now are waived)."""
    fields: dict[str, Any] = {
        "event_id": event_id,
        "ts": ts,
        "visitor_id": visitor_id,
        "url": url,
        "referrer": referrer,
        "user_agent": user_agent,
        "country": country,
    }
    return PageView.model_validate(fields, context={"bounds": _WIDE})


def at_us(us: int) -> datetime:
    """The aware UTC datetime ``us`` microseconds after the epoch."""
    return _EPOCH + timedelta(microseconds=us)


@dataclass(frozen=True)
class VisitLog:
    """A generated log: ``events`` in arrival order (duplicates included), with the ids of the
    views that arrived after a view later than themselves."""

    events: tuple[PageView, ...]
    late: frozenset[str]

    def __str__(self) -> str:
        lines = [
            f"{e.event_id:>4} {e.ts.isoformat()} {e.visitor_id} {e.url} ref={e.referrer} "
            f"country={e.country} ua={(e.user_agent or '')[:20]}{' LATE' if e.event_id in self.late else ''}"
            for e in self.events
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Draft:
    ts_us: int
    visitor: str
    site: str
    late: bool


@st.composite
def visit_logs(
    draw: st.DrawFn,
    max_chains: int = 5,
    max_views: int = 6,
    gap_us: int = GAP_US,
) -> VisitLog:
    """A log of a few chains of views (see the module's docstring), at most about
    ``max_chains * (2 * max_views)`` events plus duplicates."""
    steps = tuple(sorted({s * gap_us // GAP_US for s in STEPS_US} | {gap_us - 1, gap_us, gap_us + 1}))
    drafts: list[_Draft] = []
    for _ in range(draw(st.integers(1, max_chains))):
        visitor = draw(st.sampled_from(VISITORS))
        site = draw(st.sampled_from(SITES))
        t = MIDNIGHT_US + draw(
            st.one_of(st.sampled_from(START_OFFSETS_US), st.integers(-3 * HOUR_US, 3 * HOUR_US))
        )
        for i in range(draw(st.integers(1, max_views))):
            if i:
                step = draw(st.one_of(st.sampled_from(steps), st.integers(0, 3 * gap_us)))
                if step > gap_us and draw(st.integers(0, 2)) > 0:
                    # A bridge, arriving late: within the gap of both sides when step <= 2 gaps.
                    offset = draw(st.sampled_from((gap_us, step - gap_us, step // 2)))
                    drafts.append(_Draft(t + offset, visitor, site, True))
                t += step
            drafts.append(_Draft(t, visitor, site, draw(st.integers(0, 5)) == 0))
    ids = draw(
        st.lists(
            st.integers(0, max(99, 2 * len(drafts))), min_size=len(drafts), max_size=len(drafts), unique=True
        )
    )
    events = [_event(draw, f"e{n}", d) for n, d in zip(ids, drafts, strict=True)]

    # Arrival: the views on time in time order (ties in drawn order), each late one somewhere
    # after the last on-time view not later than itself.
    timely = sorted((e for e, d in zip(events, drafts, strict=True) if not d.late), key=lambda e: e.ts)
    arrival = list(timely)
    late_ids = set()
    for e, d in zip(events, drafts, strict=True):
        if d.late:
            due = sum(1 for x in timely if x.ts <= e.ts)
            due_at = arrival.index(timely[due - 1]) + 1 if due else 0
            arrival.insert(draw(st.integers(due_at, len(arrival))), e)
    for i, e in enumerate(arrival):
        if any(x.ts > e.ts for x in arrival[:i]):
            late_ids.add(e.event_id)

    # Duplicates: exact copies, each after its original.
    for original in draw(st.lists(st.sampled_from(arrival), max_size=4)) if arrival else []:
        position = arrival.index(original)
        arrival.insert(draw(st.integers(position + 1, len(arrival))), original)
    return VisitLog(tuple(arrival), frozenset(late_ids))


@st.composite
def visit_log_sets(
    draw: st.DrawFn, max_logs: int = 4, max_chains: int = 5, max_views: int = 6, gap_us: int = GAP_US
) -> VisitLog:
    """Several :func:`visit_logs` in one, interleaved in arrival order with a merge of their
    orders, each with its own visitors and event ids (suffix ``-i``): one Spark run then checks as
    many logs as it would check one."""
    logs = draw(st.lists(visit_logs(max_chains, max_views, gap_us), min_size=1, max_size=max_logs))
    queues = [
        [
            e.model_copy(update={"visitor_id": f"{e.visitor_id}-{i}", "event_id": f"{e.event_id}-{i}"})
            for e in log.events
        ]
        for i, log in enumerate(logs)
    ]
    late = frozenset(f"{event_id}-{i}" for i, log in enumerate(logs) for event_id in log.late)
    arrival: list[PageView] = []
    while any(queues):
        queue = draw(st.sampled_from([q for q in queues if q]))
        arrival.append(queue.pop(0))
    return VisitLog(tuple(arrival), late)


def _event(draw: st.DrawFn, event_id: str, d: _Draft) -> PageView:
    referrer = draw(st.sampled_from((*EXTERNAL_REFERRERS, f"https://{d.site}/x")))
    return page_view(
        event_id,
        at_us(d.ts_us),
        d.visitor,
        f"https://{d.site}{draw(st.sampled_from(PATHS))}",
        referrer,
        draw(st.sampled_from(AGENTS)),
        draw(st.sampled_from(COUNTRIES)),
    )


def micro_batches(log: VisitLog) -> st.SearchStrategy[list[list[PageView]]]:
    """``log``'s events in arrival order cut into consecutive micro-batches (at least one)."""
    n = len(log.events)

    def cut(points: list[int]) -> list[list[PageView]]:
        bounds = [0, *sorted(set(points)), n]
        return [list(log.events[a:b]) for a, b in pairwise(bounds) if b > a]

    return st.lists(st.integers(1, max(1, n - 1)), max_size=4).map(cut)
