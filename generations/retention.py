"""Which generations keep their data: the decisions behind retiring and garbage collection.

Pure functions of the registry's generations (and the time), so that the rules that decide what
may be deleted are stated once and tested without any store; the registry and the batch job apply
them. Deleting the wrong data would make the served numbers wrong, so the rules err on keeping:

- a generation in progress (``opening``/``building``) keeps everything: a run may be writing it;
- a served or superseded generation keeps every collection its day map names, whichever
  generation wrote it (an incremental run reuses older generations' days without copying);
- a retired generation keeps its own collections for ``retire_grace_s`` after it was retired;
  then it expires. A failed one keeps nothing (the run that failed drops what it wrote, and so
  does the next run for one that crashed); it expires ``retire_grace_s`` after it finished.
  Expired generations are marked ``-dropped``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from generations.state import IN_PROGRESS, RETAINED, GenerationState

if TYPE_CHECKING:
    from generations.model import Generation


def to_retire(generations: Sequence[Generation], keep: int) -> list[Generation]:
    """The served or superseded generations older than the newest ``keep`` of them (``generations``
    in ascending order, as ``GenerationRegistry.all`` gives them); all of them if ``keep`` is 0."""
    published = [g for g in generations if g.state in RETAINED]
    return published[:-keep] if keep else published


def expired(generations: Iterable[Generation], grace_s: float, now: datetime) -> list[Generation]:
    """Retired or failed generations whose grace period is over: their data may now be deleted."""
    out = []
    for g in generations:
        since = (
            g.retired_at
            if g.state == GenerationState.RETIRED
            else g.finished_at
            if g.state == GenerationState.FAILED
            else None
        )
        if since is not None and (now - since).total_seconds() >= grace_s:
            out.append(g)
    return out


@dataclass(frozen=True)
class Retention:
    """What one garbage collection must keep, and which generations' data it may drop."""

    retained: frozenset[int]
    """Served and superseded generations."""
    referenced: frozenset[tuple[str, int]]
    """(view, generation) of every batch-view collection a retained generation's day map names."""
    protected: frozenset[int]
    """Generations whose collections nothing may drop, referenced or not: those in progress and
    those retired within their grace period."""
    expired: tuple[Generation, ...]
    """Retired or failed generations whose data goes now (then marked ``-dropped``)."""


def plan(generations: Sequence[Generation], grace_s: float, now: datetime) -> Retention:
    retained = [g for g in generations if g.state in RETAINED]
    gone = expired(generations, grace_s, now)
    gone_ids = {g.gen for g in gone}
    protected = {g.gen for g in generations if g.state in IN_PROGRESS}
    protected |= {g.gen for g in generations if g.state == GenerationState.RETIRED and g.gen not in gone_ids}
    return Retention(
        retained=frozenset(g.gen for g in retained),
        referenced=frozenset(
            (view, holder) for g in retained for view, days in g.day_map.items() for holder in days.values()
        ),
        protected=frozenset(protected),
        expired=tuple(gone),
    )
