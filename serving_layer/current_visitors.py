"""Current visitors: the unique visitors of a site or page over the last minutes of event time,
from the speed layer's per-minute sketches and sets (stores.redis.current_visitors).

**The window.** The current UTC minute (of the API's clock) and the ``minutes`` whole minutes
before it: ``[floor(now) - minutes, floor(now) + 1 min)`` of event time. So it always holds the
last ``minutes`` minutes, and up to one more; the answer gives both ends. It ends at now rather than
at the newest event time the speed layer committed: a speed layer that stopped would otherwise
show the last window it saw as if it were current.

**Exact when small.** While every minute of the window kept its set of visitor ids, the answer is
the size of their union: exact. Once one of them grew past the limit, it is the union of the
minutes' HLL sketches, with its 95% bounds, never a sum.

**Covered or not.** The minutes and the speed layer's commit record are read in one transaction,
so the number counts exactly the events below the commit's offsets. The window is *covered* when
those offsets include every record appended to the log more than ``lag_s`` before now (Kafka's
offsets for that log-append time): only the pipeline's ordinary delay is then missing. Otherwise
(a speed layer stopped or far behind) the answer has no number, says why, and when the speed layer
last committed: a low number would look like a quiet site.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from generations.model import Offsets
from serving_layer.answers import Distinct
from stores.redis.current_visitors import EPOCH, Minute, WindowRead
from views import sketches

MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class CurrentQuery:
    site: str
    view: str
    """``site``, or ``page`` for one page of the site."""
    key: str
    """The site, or the page's normalised URL."""
    minutes: int


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    minutes: tuple[int, ...]
    """Minute numbers (minutes since the epoch), oldest first."""


@dataclass(frozen=True)
class CurrentAnswer:
    query: CurrentQuery
    window: Window
    as_of: datetime
    visitors: Distinct | None
    """None when the window is not covered."""
    covered: bool
    counted_before: datetime
    """The log-append time every record before which must be counted for the window to be covered."""
    reason: str | None
    realtime_offsets: Offsets
    committed_at: datetime | None


def window(now: datetime, minutes: int) -> Window:
    """The window of ``minutes`` at ``now`` (see the module's docstring)."""
    current = int(now.timestamp() // 60)
    first = current - minutes
    return Window(EPOCH + first * MINUTE, EPOCH + (current + 1) * MINUTE, tuple(range(first, current + 1)))


def distinct(minutes: Sequence[Minute]) -> Distinct:
    """The visitors of the window's minutes: the union of their sets while every one kept it (exact),
    else the union of their sketches."""
    sets = [m.visitors for m in minutes]
    if all(s is not None for s in sets):
        n = float(len(frozenset[bytes]().union(*(s for s in sets if s is not None))))
        return Distinct(n, n, n, True)
    e = sketches.estimate(m.sketch for m in minutes)
    return Distinct(e.estimate, e.lower, e.upper, False)


def covers(commit: Offsets, appended_before: Offsets) -> bool:
    """Whether ``commit`` includes every record below ``appended_before`` (per partition, the first
    offset appended at or after some time)."""
    return all(commit.get(p, 0) >= offset for p, offset in appended_before.items())


async def answer(
    q: CurrentQuery,
    read: Callable[[str, str, Sequence[int]], Awaitable[WindowRead]],
    offsets_at: Callable[[int], Awaitable[Offsets]],
    lag_s: float,
    now: datetime | None = None,
) -> CurrentAnswer:
    """The answer of ``q``: ``read`` the window's minutes with the commit (one transaction), and
    ``offsets_at`` a log-append time in milliseconds (Kafka's first offsets at or after it)."""
    now = now or datetime.now(UTC)
    w = window(now, q.minutes)
    counted_before = now - timedelta(seconds=lag_s)
    snapshot = await read(q.view, q.key, w.minutes)
    appended = await offsets_at(int(counted_before.timestamp() * 1000))
    covered = covers(snapshot.commit, appended)
    reason = None
    if not covered:
        reason = (
            "the speed layer has not counted every record appended to the log before "
            f"{counted_before.isoformat(timespec='seconds')} (its last commit: "
            f"{snapshot.committed_at or 'none'}): the window is not covered, and a count would be too low"
        )
    return CurrentAnswer(
        q,
        w,
        now,
        distinct(snapshot.minutes) if covered else None,
        covered,
        counted_before,
        reason,
        snapshot.commit,
        None if snapshot.committed_at is None else datetime.fromisoformat(snapshot.committed_at),
    )
