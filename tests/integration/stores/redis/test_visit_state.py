"""The speed layer's visit bookkeeping on the real Redis: what a commit writes is what the next
micro-batch reads as its horizon, a fresh start clears what an earlier version kept, and flags go
with their generation."""

from __future__ import annotations

import redis

from config.settings import Settings
from stores.redis import visit_state
from stores.redis.teardown import drop_generations


def _commit(client: redis.Redis, sink: visit_state.VisitStateSink) -> None:
    with client.pipeline(transaction=True) as pipe:
        sink.flush(pipe)
        pipe.execute()


def test_the_horizon_round_trips_and_flags_go_with_their_generation(platform: Settings) -> None:
    client = redis.Redis(host=platform.redis_host, port=platform.redis_port, db=platform.redis_db)
    try:
        # What an earlier version kept under the prefix (a visitor-day's visits) goes at a fresh start.
        client.set(f"{visit_state.PREFIX}2026-11-20|s.example|v1", "[]")
        assert visit_state.clear(client, "dims-a", 4_000, 1_000) >= 1
        assert client.exists(f"{visit_state.PREFIX}2026-11-20|s.example|v1") == 0
        assert visit_state.read_meta(client) == visit_state.Meta(4_000, "dims-a", 1_000)

        sink = visit_state.VisitStateSink(drop_before_us=1_500, watermark_ms=9_000)
        sink.add_flag(7, "s.example", "2026-11-20")
        sink.add_flag(7, "s.example", "2026-11-20")
        _commit(client, sink)
        assert visit_state.read_meta(client) == visit_state.Meta(9_000, "dims-a", 1_500)

        # Flags live under their generation's prefix and go with it.
        assert client.smembers(visit_state.flags_key(7)) == {b"s.example|2026-11-20"}
        drop_generations(client, {7})
        assert client.exists(visit_state.flags_key(7)) == 0
    finally:
        visit_state.clear(client, "")
        client.close()
