"""The speed layer's exactly-once commit of a micro-batch to Redis.

All writes of a micro-batch, its batch id and its end offsets go in one Redis transaction guarded
by ``WATCH`` of the generation registry's active set and the commit record. The same transaction
records, per generation, the views (and their fingerprints) the job counted it with, so the API
serves a view only where the realtime part counted it from the generation's cut, and the stats
record (:func:`speed_layer.progress.stats_record`), so its dead-letter totals count a batch once,
and the current visitors' minutes (speed_layer.current_visitors) and the filter table's rows
(speed_layer.filter_rows), so an answer read with the commit record counts exactly the events below
its offsets.

Exactly-once: Spark replays an uncommitted batch with the same id and the same offsets after a
crash. A batch id at or below the committed one is skipped; a batch id that does not follow the
committed one means Redis lost writes (flushed, or restarted from an old file) and the job stops
with an error instead of counting on top of a hole: ``make rebuild-realtime`` then rebuilds the
views from the log.

The view rows for a set of active generations come from a function the caller passes (the job
computes them with Spark), so the protocol holds no Spark code and is tested with plain rows
(tests/integration/speed_layer/test_speed_commit.py). This module keeps the protocol (what is
committed, for which generations, when); the transaction's Redis commands are
stores.redis.handshake's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_fixed,
)

from generations.model import Offsets, SpeedCommit
from generations.registry import GenerationRegistry
from speed_layer.outputs import RealtimeRows
from speed_layer.progress import BatchReport, stats_record
from speed_layer.writes import RowWrites
from stores.redis.current_visitors import CurrentVisitorsSink
from stores.redis.handshake import Conflict, RedisSpeedCommits, Unreachable

log = logging.getLogger(__name__)

REDIS_RETRY_S = 120.0
"""How long a micro-batch keeps retrying while Redis is unreachable (a restart) before failing."""
REDIS_RETRY_WAIT_S = 1.0
"""The pause between two tries while Redis is unreachable."""

T = TypeVar("T")

RowsFor = Callable[[dict[int, Offsets]], RealtimeRows]
"""The realtime rows of the micro-batch for these active generations (speed_layer.outputs), computed
again only when the active set changed during the commit."""


class RealtimeStateLost(RuntimeError):
    """Redis no longer holds the commits the checkpoint says were made: rebuild the views."""


def already_committed(commit: SpeedCommit, batch_id: int, prev_offsets: Offsets | None) -> bool:
    """Whether ``batch_id`` is in Redis already (a replay after a crash: skip it).

    Raises :class:`RealtimeStateLost` when Redis' commit is not the batch right before this one:
    Redis was flushed or restarted from an old file, and counting on would leave a hole.
    """
    if commit.batch_id >= batch_id:
        return True
    if batch_id > 0 and (commit.batch_id != batch_id - 1 or commit.offsets != prev_offsets):
        raise RealtimeStateLost(
            f"Redis holds the speed layer's commit of batch {commit.batch_id} (offsets "
            f"{commit.offsets}) but the checkpoint is at batch {batch_id - 1} (offsets "
            f"{prev_offsets}): realtime views lost writes. Run `make rebuild-realtime`."
        )
    return False


class Committer:
    """Commits micro-batches for the generations active at the moment of the commit.

    ``commits`` are the store's transactions; ``view_marks`` are the views (name@fingerprint) the
    job counts with; ``lag`` gives the latest records-behind per partition for the stats record.
    """

    def __init__(
        self,
        commits: RedisSpeedCommits,
        registry: GenerationRegistry,
        view_marks: list[str],
        lag: Callable[[], dict[int, int]],
        minute_sink: Callable[[], CurrentVisitorsSink] | None = None,
    ) -> None:
        self.commits = commits
        self.registry = registry
        self.view_marks = view_marks
        self.lag = lag
        self.minute_sink = minute_sink
        """A new sink of current visitors' minutes (stores.redis.current_visitors) per attempt;
        None: the rows carry none."""

    def commit(
        self,
        batch_id: int,
        prev_offsets: Offsets | None,
        end_offsets: Offsets,
        report: BatchReport,
        rows_for: RowsFor,
    ) -> tuple[int, list[int]]:
        """Compute the rows for the active generations and commit them with the batch id; returns
        the number of realtime keys written and the generations counted ((0, []) for a replay).

        The transaction WATCHes the generation registry: if a batch run opens a generation while
        the rows are computed, EXEC fails and the rows are computed again for the new set, so the
        new cut (at or after everything committed) and this batch never disagree.
        """
        pending = _PendingCommit(batch_id, prev_offsets, end_offsets, report, rows_for)

        def attempt() -> tuple[int, list[int]]:
            return self._commit_once(pending)

        def recomputing(state: RetryCallState) -> None:
            if state.outcome is not None and isinstance(state.outcome.exception(), Conflict):
                log.info("batch %d: the active generations changed during the batch; recomputing", batch_id)

        # Each attempt waits through a Redis outage of its own (a Conflict means Redis answered).
        result: tuple[int, list[int]] = Retrying(
            retry=retry_if_exception_type((Conflict, _NoActiveGeneration)), before_sleep=recomputing
        )(redis_call, attempt)
        return result

    def _commit_once(self, pending: _PendingCommit) -> tuple[int, list[int]]:
        """One WATCH/MULTI/EXEC attempt of :meth:`commit`; raises Conflict when the registry
        changed under it, :class:`_NoActiveGeneration` after creating the first generation."""
        batch_id, prev_offsets, report = pending.batch_id, pending.prev_offsets, pending.report
        with self.commits.transaction() as txn:
            # Checked again under WATCH: Redis may have been flushed since the first look.
            if already_committed(txn.speed_commit(), batch_id, prev_offsets):
                return 0, []
            active = txn.active()
            if not active:
                txn.unwatch()
                self.registry.ensure_hot_copy()
                raise _NoActiveGeneration
            if active != pending.computed_for:
                pending.rows = pending.rows_for(active)
                pending.computed_for = active
            t0 = time.monotonic()
            writes = RowWrites(pending.rows, self.commits.sink(), self.minute_sink)
            if writes.filters is not None:
                report.phases["filter rows"] = writes.filter_seconds
            previous = txn.speed_stats()
            counted = {g: self._counted_views(txn.counted_views(g)) for g in active}
            txn.multi()
            written = writes.flush(txn.pipeline)
            for g, marks in counted.items():
                txn.record_views(g, marks)
            txn.record_commit(
                SpeedCommit(batch_id, pending.end_offsets),
                stats_record(report, previous, self.lag(), sorted(active)),
            )
            txn.execute()
            report.phases["commit"] = time.monotonic() - t0 - writes.filter_seconds  # reported beside it
            return written, sorted(active)

    def _counted_views(self, stored: frozenset[str] | None) -> list[str]:
        """The views a realtime generation will have been counted with after this batch, given
        those it has been (``stored``): this job's own if the generation is new to the realtime
        views, else those it had that this job counts too (a view missing from one micro-batch is
        missing for the rest of the generation)."""
        if stored is None:
            return self.view_marks
        return sorted(stored & set(self.view_marks))


def redis_call(fn: Callable[[], T]) -> T:
    """``fn()``, waiting through a Redis restart: retried every REDIS_RETRY_WAIT_S while Redis is
    unreachable, given up when this call has lasted REDIS_RETRY_S. Every call has a clock of its
    own, so an outage is never charged with the time of an earlier one."""
    try:
        return Retrying(
            retry=retry_if_exception_type(Unreachable),
            stop=stop_after_delay(REDIS_RETRY_S),
            wait=wait_fixed(REDIS_RETRY_WAIT_S),
            before_sleep=_log_redis_unreachable,
        )(fn)
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise RuntimeError(f"Redis unreachable for {REDIS_RETRY_S:.0f} s: {last}") from last


@dataclass
class _PendingCommit:
    """One micro-batch on its way to Redis: what every commit attempt shares, and the rows computed
    so far with the generations they are for (an attempt recomputes them only when those changed)."""

    batch_id: int
    prev_offsets: Offsets | None
    end_offsets: Offsets
    report: BatchReport
    rows_for: RowsFor
    computed_for: dict[int, Offsets] | None = None
    rows: RealtimeRows = field(default_factory=RealtimeRows)


class _NoActiveGeneration(Exception):
    """The registry had no active generation: the job created generation 0; try again."""


def _log_redis_unreachable(state: RetryCallState) -> None:
    log.warning("Redis unreachable (%s); retrying", state.outcome.exception() if state.outcome else "?")
