"""The values the query engine works with, and the errors it raises.

The stores' values (the batch documents, the realtime days and snapshots, the generation records)
are their interfaces' own (stores.batch_views, stores.realtime_views, generations.model); they are
re-exported here under the names the engine reads them by. Nothing here knows about HTTP: the API
maps :class:`InvalidQuery` to 422, :class:`BatchUnavailable` and :class:`NothingServed` to 503 and
:class:`ConsistencyTimeout` to 504.
"""

from __future__ import annotations

from generations.model import GENERATION_ZERO as GENERATION_ZERO
from generations.model import Generation
from generations.model import Offsets as Offsets
from generations.model import Served as Served
from generations.model import SpeedCommit as SpeedCommit
from stores.batch_views import BatchDoc as BatchDoc
from stores.errors import BatchUnavailable as BatchUnavailable
from stores.errors import RealtimeUnavailable as RealtimeUnavailable
from stores.realtime_views import COUNTS_ONLY as COUNTS_ONLY
from stores.realtime_views import Cell as Cell
from stores.realtime_views import DayRead as DayRead
from stores.realtime_views import FilterRowsBudget as FilterRowsBudget
from stores.realtime_views import FilterRowsSnapshot as FilterRowsSnapshot
from stores.realtime_views import Measure as Measure
from stores.realtime_views import RankRead as RankRead
from stores.realtime_views import RealtimeDay as RealtimeDay
from stores.realtime_views import RealtimeSnapshot as RealtimeSnapshot

GenerationInfo = Generation
"""The generation record (generations.model) under the name the engine reads it by: a query
reads its cut, day map, fingerprints and views, fixed once it is published."""


class ServingError(RuntimeError):
    pass


class InvalidQuery(ServingError):
    """A query that cannot be answered as asked; names the parameter at fault."""

    def __init__(self, param: str, problem: str) -> None:
        super().__init__(f"{param}: {problem}")
        self.param = param
        self.problem = problem


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
