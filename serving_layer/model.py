"""The values the readers hand to the query engine, and the errors the engine raises.

Nothing here knows about HTTP: the API maps :class:`InvalidQuery` to 422, :class:`BatchUnavailable`
and :class:`NothingServed` to 503 and :class:`ConsistencyTimeout` to 504.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# The generation protocol's own records, re-exported for the readers.
from generations.keys import Offsets as Offsets
from generations.keys import Served as Served
from generations.keys import SpeedCommit as SpeedCommit
from views import rows, sketches


@dataclass(frozen=True, slots=True)
class BatchDoc:
    """One batch-view document (batch_layer.store): a key's day and its 24 hours.

    ``h_sk`` is None while hour sketches stored apart (views.rows.row_to_documents) have not been
    read: only queries that union hours of the day read them (:meth:`with_hour_sketches`).
    """

    pv: int
    uv: int
    sk: bytes | None
    h_pv: list[int]
    h_uv: list[int]
    h_sk: list[bytes | None] | None
    _unions: dict[tuple[int, ...], bytes | None] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )
    """Memo of :meth:`hours_union` (the document is immutable, so are its unions)."""

    def hours_union(self, hours: tuple[int, ...]) -> bytes | None:
        """The union of some hours' sketches, serialised; computed once per document and hours."""
        if self.h_sk is None:
            raise RuntimeError("hour sketches stored apart were not read for this query")
        if hours not in self._unions:
            h_sk = self.h_sk
            self._unions[hours] = sketches.union_bytes(h_sk[h] for h in hours)
        return self._unions[hours]

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> BatchDoc:
        """The stored document (views.rows, any layout; hour sketches stored apart not yet read);
        raises :class:`~views.rows.MalformedDocument` for one that does not decode."""
        h_sk: list[bytes | None] | None
        if rows.sketches_apart(doc):
            h_pv, h_uv, _ = rows.unpack_hours(doc["h"])
            h_sk = None
        else:
            h_pv, h_uv, h_sk = rows.decoded_hours(doc)
        try:
            sk = doc.get("sk")
            return cls(
                pv=int(doc["pv"]),
                uv=int(doc["uv"]),
                sk=None if sk is None else bytes(sk),
                h_pv=h_pv,
                h_uv=h_uv,
                h_sk=h_sk,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise rows.MalformedDocument(f"day totals: {exc!r}") from exc

    @property
    def sketches_apart(self) -> bool:
        """Whether the hour sketches are stored apart and not read yet."""
        return self.h_sk is None

    def with_hour_sketches(self, of: str, companion: dict[str, Any] | None) -> BatchDoc:
        """This document with its hour sketches read from their own document, ``companion``
        (raises :class:`~views.rows.MalformedDocument` when it is missing or not this one's)."""
        h_sk = rows.hour_sketches(of, self.h_pv, self.h_uv, companion)
        return BatchDoc(self.pv, self.uv, self.sk, self.h_pv, self.h_uv, h_sk)

    @property
    def size(self) -> int:
        """Approximate bytes held in memory, for the cache's budget."""
        return 600 + len(self.sk or b"") + sum(len(s) for s in self.h_sk or () if s)


@dataclass(frozen=True)
class GenerationInfo:
    """What a query needs of a published generation; fixed once it is published."""

    gen: int
    cut: Offsets
    started_at: datetime
    served_at: datetime | None
    day_map: dict[str, dict[str, int]]
    """view -> day -> generation whose collection holds that day's documents."""
    fingerprints: dict[str, str] = field(default_factory=dict)
    """view -> fingerprint of the code that computed its batch views (views.registry)."""
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    """view -> its description for the API (per_site, description, examples)."""


GENERATION_ZERO = GenerationInfo(
    gen=0, cut={}, started_at=datetime(1970, 1, 1, tzinfo=UTC), served_at=None, day_map={}
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
    """One transaction's view of Redis: the served pointer, the speed layer's commit, the data.

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
