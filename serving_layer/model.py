"""The values the readers hand to the query engine, and the errors the engine raises.

Nothing here knows about HTTP: the API maps :class:`InvalidQuery` to 422, :class:`BatchUnavailable`
and :class:`NothingServed` to 503 and :class:`ConsistencyTimeout` to 504.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from datetime import UTC, datetime

# The generation protocol's own records and the batch document, re-exported for the engine.
from generations.model import Generation
from generations.model import Offsets as Offsets
from generations.model import Served as Served
from generations.model import SpeedCommit as SpeedCommit
from generations.state import GenerationState
from stores.base import BatchDoc as BatchDoc

GenerationInfo = Generation
"""The generation record (generations.model) under the name the engine reads it by: a query
reads its cut, day map, fingerprints and views, fixed once it is published."""


GENERATION_ZERO = Generation(
    gen=0, kind="full", state=GenerationState.SERVED, cut={}, started_at=datetime(1970, 1, 1, tzinfo=UTC)
)
"""What is served before the first batch run: generation 0 has no batch views and its cut is the
start of the log, so the realtime views alone answer (generations.registry.ensure_hot_copy). It is
only in Redis' pointer, never a registry document, so the readers know it without one."""


@dataclass(frozen=True, slots=True)
class HashRead:
    """Fields of one realtime hash: (view, key, day) of the served generation."""

    view: str
    key: str
    day: str
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RankRead:
    """The realtime ranking (key -> day's page views) of one view and day."""

    view: str
    day: str


@dataclass(frozen=True)
class RealtimeSnapshot:
    """One atomic read of Redis: the served pointer, the speed layer's commit, the data.

    ``hashes[i]`` answers the i-th :class:`HashRead` (field -> raw value, absent fields left out);
    ``ranks[i]`` the i-th :class:`RankRead`. ``served`` is None when Redis has no served pointer
    (nothing published yet, or Redis lost its data); then the data lists are empty.
    """

    served: Served | None
    commit: SpeedCommit
    hashes: list[dict[str, bytes]]
    ranks: list[list[tuple[str, float]]]
    views: frozenset[str] | None = None
    """The views (``name@fingerprint``) the speed layer counted the served generation with since
    its cut; None when it has not counted it yet (its realtime views are then empty)."""
    visit_flags: frozenset[str] = frozenset()
    """``{site}|{day}`` whose realtime visits may not be exact (stores.redis.visit_state)."""
    stamp: Hashable | None = None
    """What identifies the realtime state this snapshot saw: equal stamps, equal realtime values
    (the served pointer, the commit record and the generation's view and visit-flag sets as Redis
    held them; every write of realtime values changes the commit record in the same transaction).
    None where the store cannot tell (no commit yet, a store without one): nothing may be reused."""


@dataclass(frozen=True)
class FilterRowsBudget:
    """What a read of the filter table's realtime rows may fetch: the lists are read only if the
    served generation is ``gen`` and their counted rows and bytes (FilterRowsSnapshot.rows,
    .nbytes) are at most ``rows`` and ``nbytes``; otherwise the read returns the counts alone
    (``withheld``). A budget may be negative: then nothing is read (the batch part alone is over
    the limit)."""

    gen: int
    rows: int
    nbytes: int

    def allows(self, gen: int, rows: int, nbytes: int) -> bool:
        """Whether the lists of generation ``gen`` holding ``rows`` rows and ``nbytes`` bytes may
        be read (the rule the Redis function applies too: stores/redis/snapshot.lua)."""
        return gen == self.gen and rows <= self.rows and nbytes <= self.nbytes


COUNTS_ONLY = FilterRowsBudget(-1, -1, -1)
"""A budget that reads no list: the counts alone, with the served generation they are of."""


@dataclass(frozen=True)
class FilterRowsSnapshot:
    """One atomic read of the filter table's realtime rows (stores.redis.filter_rows) of one site
    and some days: the served pointer, the speed layer's commit, the served generation's counted
    views and the lists' elements, all as Redis held them at one instant.

    ``blobs`` are the Arrow IPC streams of the lists of the requested days, in the order of the
    days and, within a day, of the micro-batches (decode them with
    stores.redis.filter_rows.decode_blobs). ``served`` is None when Redis has no served pointer;
    then ``views`` is None and ``blobs`` empty. The rows count for the served generation only when
    ``views`` holds the filter table's mark (views.filter_table.mark) with the fingerprint of the
    generation's batch part: then they hold every event from its cut up to ``commit.offsets``.
    A read with a :class:`FilterRowsBudget` returns the lists only within it (else ``withheld``)."""

    served: Served | None
    commit: SpeedCommit
    views: frozenset[str] | None
    blobs: list[bytes]
    stamp: Hashable | None = None
    """As RealtimeSnapshot.stamp: the served pointer, the commit record and the views set, raw;
    equal stamps, equal rows. None without a commit record."""
    rows: int = 0
    """The rows of the requested days' lists, as the commits that appended them counted them (read
    at the same instant as the lists), whether the lists were read or not."""
    nbytes: int = 0
    """What reading those lists holds in memory: the streams plus their rows decoded
    (stores.redis.filter_rows.read_bytes), counted the same way."""
    withheld: bool = False
    """The lists were not read (``blobs`` is empty though ``rows`` may not be 0): the read's
    :class:`FilterRowsBudget` did not allow them."""
    visit_flags: frozenset[str] = frozenset()
    """The served generation's ``site|day`` whose realtime visits may not be exact (as
    RealtimeSnapshot.visit_flags), read at the same instant."""


class ServingError(RuntimeError):
    pass


class InvalidQuery(ServingError):
    """A query that cannot be answered as asked; names the parameter at fault."""

    def __init__(self, param: str, problem: str) -> None:
        super().__init__(f"{param}: {problem}")
        self.param = param
        self.problem = problem


class BatchUnavailable(ServingError):
    """MongoDB did not answer: without batch views no number would be right."""


class RealtimeUnavailable(ServingError):
    """Redis did not answer: answers fall back to the batch views, flagged partial."""


class NothingServed(ServingError):
    """No generation has been published yet."""


class NotReady(ServingError):
    """A view the served generation cannot answer exactly yet (declared after it was opened, or
    not counted by the running speed layer); names the view."""

    def __init__(self, view: str, problem: str) -> None:
        super().__init__(f"dimension {view!r} is not ready: {problem}")
        self.view = view


class ConsistencyTimeout(ServingError):
    """The events a query asked to see were not yet visible when its wait ran out."""

    def __init__(self, pending: Offsets, waited_s: float) -> None:
        parts = ", ".join(f"partition {p} below offset {o}" for p, o in sorted(pending.items()))
        super().__init__(f"after {waited_s:.2f} s the served views do not cover: {parts}")
        self.pending = pending
        self.waited_s = waited_s
