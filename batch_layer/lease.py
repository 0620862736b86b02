"""The batch layer's single-writer lease: one batch run at a time, whatever its host or pid.

A run holds the lease record (stores.lease.LeaseStore; on MongoDB one document beside the served
pointer: stores.mongo.lease) with a random token, an expiry, and a **fence**: a number that grows
by one at every acquisition. While the run works, a heartbeat thread renews the expiry every third
of the lease; a run that dies (kill -9, a lost host, a container whose host name and pid are the
same every time) stops renewing, and the next run takes the lease over once it has expired, and
not before. Nothing about the holder's host or pid is trusted: a pid is reused, and in a container
every run is ``batch:1``.

A run that was paused past its lease (a stopped process, a frozen VM, a long GC) and then resumes
must not touch anything the new holder owns. Before every step that drops, writes or publishes, the
run checks that the lease record still carries its token and fence and has at least a third of
the lease left (:meth:`Held.check`); a heartbeat that found its token gone marks the lease lost,
and every later check fails. The registry's publish is also conditional on the generation still
being ``building`` (a takeover marks it failed first), so even a pause between the check and the
publish cannot serve a generation whose data the new holder dropped.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from contract import utc
from stores.errors import StoreUnavailable
from stores.lease import LeaseRecord, LeaseStore

log = logging.getLogger(__name__)

RELEASED = datetime(1970, 1, 1, tzinfo=UTC)
"""The expiry a released lease carries: any run may take it at once."""


class LeaseHeld(RuntimeError):
    """Another run holds a lease that has not expired."""


class LeaseLost(RuntimeError):
    """This run's lease expired or was taken over: it must not drop, write or publish anything."""


@dataclass
class Held:
    """A lease this run holds: its token and fence, and whether a heartbeat found it lost."""

    lease: BatchLease
    token: str
    fence: int
    owner: str
    lost: threading.Event = field(default_factory=threading.Event)

    def check(self, step: str) -> None:
        """Raise LeaseLost unless the lease is still this run's with a third of it left.

        Called before every step that changes shared state; ``step`` names it in the error."""
        if self.lost.is_set():
            raise LeaseLost(f"{step}: this run's lease (fence {self.fence}) was lost; stopping")
        record = self.lease.document()
        if record is None or record.token != self.token or record.fence != self.fence:
            self.lost.set()
            holder = record.owner if record else "nobody"
            raise LeaseLost(f"{step}: the lease was taken over (now held by {holder}); stopping")
        left = (_expiry(record) - self.lease.clock()).total_seconds()
        if left < self.lease.duration_s / 3:
            raise LeaseLost(f"{step}: only {left:.1f} s of the lease left (fence {self.fence}); stopping")


def _expiry(record: LeaseRecord) -> datetime:
    return record.expires_at if record.expires_at is not None else RELEASED


class BatchLease:
    """The lease record and the operations on it (each one atomic write of the store)."""

    def __init__(self, store: LeaseStore, duration_s: float, clock: Callable[[], datetime] = utc.now) -> None:
        self.store = store
        self.duration_s = duration_s
        self.clock = clock

    def document(self) -> LeaseRecord | None:
        return self.store.read()

    def acquire(self, owner: str) -> Held:
        """Take the lease if nobody holds it or its holder let it expire; else LeaseHeld."""
        token = uuid.uuid4().hex
        now = self.clock()
        current = self.document()
        fence = 1 if current is None else current.fence + 1
        record = LeaseRecord(
            token=token,
            fence=fence,
            owner=owner,
            since=now,
            expires_at=now + timedelta(seconds=self.duration_s),
        )
        if current is None:
            if not self.store.create(record):
                raise LeaseHeld("another batch run took the lease at the same moment")
        else:
            expires = _expiry(current)
            if expires > now:
                raise LeaseHeld(
                    f"another batch run holds the lease ({current.owner}, fence "
                    f"{current.fence}) until {expires:%Y-%m-%dT%H:%M:%SZ}"
                )
            if not self.store.replace(current.token, record):
                raise LeaseHeld("another batch run took the lease at the same moment")
            if expires != RELEASED:
                log.warning(
                    "took over the batch lease of %s (fence %s), expired at %s: that run stopped renewing it",
                    current.owner,
                    current.fence,
                    expires,
                )
        log.info(
            "batch lease taken by %s (fence %d, %.0f s, renewed while the run works)",
            owner,
            fence,
            self.duration_s,
        )
        return Held(self, token, fence, owner)

    def renew(self, held: Held) -> None:
        """Push the expiry one lease ahead; LeaseLost if the token is no longer there."""
        if not self.store.extend(held.token, self.clock() + timedelta(seconds=self.duration_s)):
            held.lost.set()
            raise LeaseLost(f"the lease of fence {held.fence} was taken over")

    def release(self, held: Held) -> None:
        """Give the lease back (only if still ours): the next run may take it at once."""
        self.store.extend(held.token, RELEASED)

    @contextmanager
    def held(self, owner: str) -> Iterator[Held]:
        """Acquire, renew from a heartbeat thread every third of the lease, release at the end."""
        held = self.acquire(owner)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.duration_s / 3):
                try:
                    self.renew(held)
                except LeaseLost as exc:
                    log.error("%s: the run will stop at its next step", exc)
                    return
                except StoreUnavailable as exc:  # the store briefly away: the next beat tries again
                    log.warning("could not renew the batch lease: %s", exc)

        heartbeat = threading.Thread(target=beat, name="batch-lease-heartbeat", daemon=True)
        heartbeat.start()
        try:
            yield held
        finally:
            stop.set()
            heartbeat.join()
            if not held.lost.is_set():
                self.release(held)
