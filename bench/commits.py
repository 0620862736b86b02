"""The speed layer's commits during a benchmark, without running Spark: a thread that commits a
micro-batch every trigger interval through the speed layer's own commit transaction
(stores.redis.handshake.RedisSpeedCommits), adding page views to given realtime hashes and moving
the commit record on, as a running speed layer does while traffic flows.

A benchmark of the API under load uses it so that the answers change while it measures: every
commit makes the API's cached answers stale (api.answer_cache), as in production. Spark itself would
take the cores the measurement needs.
"""

from __future__ import annotations

import json
import threading
import time
from types import TracebackType

import redis

from generations.model import SpeedCommit
from stores.redis import keys
from stores.redis.handshake import RedisSpeedCommits

HOUR = 12
"""The hour of the hashes' day whose page views each commit adds to."""


class BackgroundCommits:
    """Commits every ``interval_s`` while entered: each adds one page view to every hash of
    ``hashes`` (the day's and hour :data:`HOUR`'s), the next batch id and one more offset on
    partition 0, from the commit record found (or from ``offsets``, the served generation's cut).
    On exit, the commit record found on entry is put back."""

    def __init__(self, redis_url: str, hashes: list[str], interval_s: float, offsets: dict[int, int]) -> None:
        self.client = redis.Redis.from_url(redis_url)
        self.hashes = hashes
        self.offsets = offsets
        self.interval_s = interval_s
        self.commits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-commits", daemon=True)
        self._found: bytes | str | None = None

    def __enter__(self) -> BackgroundCommits:
        self._found = self.client.get(keys.SPEED_COMMIT)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self._found is None:
            self.client.delete(keys.SPEED_COMMIT)
        else:
            self.client.set(keys.SPEED_COMMIT, self._found)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.commit()

    def commit(self) -> None:
        commit(self.client, self.hashes, self.offsets)
        self.commits += 1


def commit(client: redis.Redis, hashes: list[str], offsets: dict[int, int]) -> None:
    """One micro-batch's commit transaction: one page view more in each of ``hashes`` (the day's
    and hour :data:`HOUR`'s), the next batch id, one more offset on partition 0 than the last
    commit (or than ``offsets`` when there is none)."""
    with RedisSpeedCommits(client).transaction() as tx:
        last = tx.speed_commit()
        ends = dict(last.offsets or offsets)
        ends[0] = ends.get(0, 0) + 1
        tx.multi()
        for name in hashes:
            tx.pipeline.hincrby(name, keys.PV, 1)
            tx.pipeline.hincrby(name, keys.hour_field(keys.PV, HOUR), 1)
        stats = {"batch_id": last.batch_id + 1, "at": time.time(), "rows": len(hashes)}
        tx.record_commit(SpeedCommit(last.batch_id + 1, ends), json.dumps(stats))
        tx.execute()
