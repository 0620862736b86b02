"""The generation registry: which batch run is served, what each covers, and the opening handshake.

A generation ``g`` is one batch run. Its **cut** (one offset per Kafka partition) splits the log:
batch views of ``g`` cover offsets below the cut, realtime views of ``g`` the offsets at or above.

Where state lives:
- MongoDB is durable and authoritative: one document per generation (state, cut, times, which
  stored documents make up each view) and the ``served`` pointer, switched by a single-document
  write, which is atomic on every MongoDB-protocol server.
- Redis holds the hot copy the speed layer and the API read on every micro-batch and query: the
  active generations with their cuts, and the served generation number.

This module keeps the protocol; the stores keep the commands: the durable half is a
generations.storage.GenerationStore (MongoDB's: stores.mongo.generations), the hot copy a
generations.storage.HotCopy (Redis': stores.redis.handshake). Both are handed in by a composition
root (the API's status, the jobs): the registry imports no backend.

Opening a generation must not race with the speed layer. The speed layer commits each micro-batch
with its end offsets under ``WATCH`` of the active-generation key; opening reads those committed
offsets under ``WATCH`` of the commit record and takes a cut at or after them. Whichever of the two
transactions commits second sees the other's write, aborts and retries with fresh values, so no
micro-batch is ever counted for a generation whose cut lies above it, nor skipped by one whose cut
lies below it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from contract import utc
from generations import retention
from generations.model import Generation, GenerationError, Offsets, Served
from generations.state import IN_PROGRESS, GenerationState
from generations.storage import GenerationStore, HotCopy

log = logging.getLogger(__name__)


class GenerationRegistry:
    """Durable registry (a GenerationStore: MongoDB's in the jobs and the API) with its hot copy (a
    HotCopy: Redis').

    One batch run at a time writes it (batch_layer.lease): the changes of a generation's state that
    a run paused past its lease could race with (publish, fail) are conditional on the state it
    expects, so the first of two writers wins and the second learns it lost."""

    def __init__(
        self,
        store: GenerationStore,
        hot: HotCopy,
        log_end_offsets: Callable[[], Offsets],
    ) -> None:
        self.store = store
        self.hot = hot
        self._log_end_offsets = log_end_offsets

    # --- reading -----------------------------------------------------------------------------------
    def get(self, gen: int) -> Generation | None:
        return self.store.get(gen)

    def served(self) -> Generation | None:
        gen = self.store.served_gen()
        return None if gen is None else self.get(gen)

    def all(self) -> list[Generation]:
        return self.store.all()

    def active_cuts(self) -> dict[int, Offsets]:
        """The generations the speed layer counts for, from the hot copy."""
        return self.hot.active()

    # --- the life of a generation ------------------------------------------------------------------
    def open(self, kind: str) -> Generation:
        """Register a new building generation with a cut that cannot race the speed layer."""
        self.repair_hot_copy()
        last = max((g.gen for g in self.all()), default=0)
        gen = Generation(gen=last + 1, kind=kind, state=GenerationState.OPENING, cut={}, started_at=utc.now())
        self.store.insert(gen)
        try:
            gen.cut = self._register_cut(gen.gen)
        except Exception as exc:
            self.fail(gen, f"opening failed: {exc}")
            raise
        gen.state = GenerationState.BUILDING
        self.store.save(gen)
        log.info("opened generation %d (%s) with cut %s", gen.gen, kind, gen.cut)
        return gen

    def _register_cut(self, gen: int) -> Offsets:
        """The cut of ``gen``: at or after both the log's end and every offset the speed layer has
        committed, registered in the hot copy in the transaction that read those commits (tried
        again, with fresh offsets, if the speed layer commits meanwhile)."""

        def cut_for(committed: Offsets) -> Offsets:
            log_end = self._log_end_offsets()
            return {
                p: max(log_end.get(p, 0), committed.get(p, 0)) for p in sorted(set(log_end) | set(committed))
            }

        return self.hot.register_cut(gen, cut_for)

    def save(self, gen: Generation) -> None:
        self.store.save(gen)

    def publish(
        self, gen: Generation, pointer_written: Callable[[], None] = lambda: None
    ) -> Generation | None:
        """Make ``gen`` the served generation: one pointer write in MongoDB, then the hot copy.

        Returns the previously served generation. Its realtime views leave the active set (the
        speed layer stops counting them); its batch documents stay until it is retired. A crash
        between the two writes (``pointer_written`` runs there: crash tests hold the run at it)
        leaves Redis one generation behind, still exact; :meth:`repair_hot_copy` brings it forward.
        """
        previous = self.served()
        now = utc.now()
        gen.state, gen.finished_at, gen.served_at = GenerationState.SERVED, gen.finished_at or now, now
        if not self._transition(gen, GenerationState.BUILDING):
            raise GenerationError(f"generation {gen.gen} is no longer building: another run failed it")
        self.store.point_served(gen.gen, now)
        if previous is not None:
            self.store.set_state(previous.gen, GenerationState.SUPERSEDED)
        pointer_written()
        self._write_hot_copy(served=gen)
        log.info("generation %d is served (previous: %s)", gen.gen, previous.gen if previous else "none")
        return previous

    def fail(self, gen: Generation, error: str) -> bool:
        """Mark a generation in progress failed; False (and nothing changed) when it no longer is
        (a run that outlived its lease found it published or failed by another)."""
        gen.state, gen.error, gen.finished_at = GenerationState.FAILED, error[:2000], utc.now()
        if not self._transition(gen, *IN_PROGRESS):
            return False
        self._drop_from_active(gen.gen)
        return True

    def _transition(self, gen: Generation, *expected: GenerationState) -> bool:
        """Write ``gen``'s document only if its stored state is one of ``expected`` (one
        conditional single-document write: atomic on every MongoDB-protocol server)."""
        return self.store.save_if(gen, expected)

    def retire(self, keep: int = 2) -> list[Generation]:
        """Mark generations older than the newest ``keep`` served ones as retired (data kept for a
        grace period: see generations.retention)."""
        retired = retention.to_retire(self.all(), keep)
        for g in retired:
            g.state, g.retired_at = GenerationState.RETIRED, utc.now()
            self.save(g)
        return retired

    def mark_dropped(self, gen: Generation) -> None:
        """Record that an expired generation's data is gone (its document stays)."""
        dropped = gen.state.dropped()
        self.store.set_state(gen.gen, dropped)
        gen.state = dropped

    def abandon_stale(self) -> list[Generation]:
        """Generations left building by a run that died or lost its lease: failed now (called by the
        lease's holder), except any that run published meanwhile."""
        stale = [g for g in self.all() if g.state in IN_PROGRESS]
        return [g for g in stale if self.fail(g, "abandoned: the batch run that built it did not finish")]

    # --- the hot copy in Redis --------------------------------------------------------------------
    def _write_hot_copy(self, served: Generation) -> None:
        building = {
            g.gen: g.cut for g in self.all() if g.state == GenerationState.BUILDING and g.gen > served.gen
        }
        self.hot.write({served.gen: served.cut, **building}, Served(served.gen, served.cut))

    def _drop_from_active(self, gen: int) -> None:
        self.hot.drop_active(gen)

    def ensure_hot_copy(self) -> dict[int, Offsets]:
        """The active generations, restoring Redis' copy first if Redis lost it.

        Before the first batch run there is no generation at all; the speed layer then counts for
        generation 0, which has no batch views and a cut at the start of every partition, so the
        platform answers from realtime views alone until the first generation is published.
        """
        self.repair_hot_copy()
        if self.served() is not None:
            return self.active_cuts()

        self.hot.write_if_absent({0: {}}, Served(0, {}))
        return self.active_cuts()

    def repair_hot_copy(self) -> bool:
        """Bring Redis' copy in line with MongoDB, the authority; True if it had to.

        Redis may have lost its data (it is a copy), or a run may have died between the two writes
        of a switch (the MongoDB pointer, then Redis): Redis then still serves the previous
        generation. Called when a generation opens, when the speed layer starts, and on every
        status read."""
        served = self.served()
        if served is None:
            return False
        hot = self.hot.served()
        active = self.hot.active()
        if hot.gen == served.gen and served.gen in active:
            return False
        log.warning(
            "the generation hot copy in Redis serves %s, MongoDB serves %d: bringing Redis forward",
            "nothing" if hot.gen < 0 else hot.gen,
            served.gen,
        )
        self._write_hot_copy(served)
        return True
