"""The speed layer's visit state on the real Redis: what a commit writes is what the next
micro-batch reads, visits past the horizon leave it, and flags go with their generation."""

from __future__ import annotations

import json
from typing import Any

import redis

from config.settings import Settings
from stores.redis import visit_state
from stores.redis.teardown import drop_generations


def _visit(s_ts: int, e_ts: int, n: int = 1, tainted: bool = False) -> dict[str, Any]:
    return {
        "s_ts": s_ts,
        "s_id": f"a{s_ts}",
        "e_ts": e_ts,
        "e_id": f"z{e_ts}",
        "first": {"site": "s.example", "entry_page": "https://s.example/"},
        "last": {"exit_page": "https://s.example/x"},
        "n": n,
        "tainted": tainted,
        "p_lo": 0,
        "p_hi": 0,
    }


def _commit(client: redis.Redis, sink: visit_state.VisitStateSink) -> None:
    sink.prepare()
    with client.pipeline(transaction=True) as pipe:
        sink.flush(pipe)
        pipe.execute()


def test_state_round_trips_and_visits_past_the_horizon_leave_it(platform: Settings) -> None:
    client = redis.Redis(host=platform.redis_host, port=platform.redis_port, db=platform.redis_db)
    try:
        visit_state.clear(client, "dims-a")
        sink = visit_state.VisitStateSink(client, drop_before_us=0, watermark_ms=5_000)
        sink.add_state("s.example", "v1", "2026-11-20", [_visit(1_000, 2_000, 2), _visit(9_000, 9_000)])
        sink.add_state("s.example", "v2", "2026-11-20", [_visit(500, 600)])
        sink.add_flag(7, "s.example", "2026-11-20")
        _commit(client, sink)

        assert visit_state.read_meta(client) == visit_state.Meta(5_000, "dims-a", 0)
        touched = [
            ("s.example", "v1", "2026-11-20"),
            ("s.example", "v2", "2026-11-20"),
            ("s.example", "v3", "2026-11-20"),
        ]
        loaded = [
            (visitor, v["s_ts"], v["n"])
            for _, visitor, _, text in visit_state.load_texts(client, touched)
            for v in json.loads(text)
        ]
        assert loaded == [("v1", 1_000, 2), ("v1", 9_000, 1), ("v2", 500, 1)]

        # A commit past a cut-off deletes the visitor-days whose every visit ended before it,
        # untouched ones included (v2), keeping the others.
        _commit(client, visit_state.VisitStateSink(client, drop_before_us=1_500, watermark_ms=9_000))
        assert client.exists(visit_state.state_key("s.example", "v2", "2026-11-20")) == 0
        assert client.exists(visit_state.state_key("s.example", "v1", "2026-11-20")) == 1
        assert client.zcard(visit_state.ENDS) == 1
        assert visit_state.read_meta(client).watermark_ms == 9_000

        # A visitor-day whose visits all left is deleted when touched.
        sink = visit_state.VisitStateSink(client, drop_before_us=10_000, watermark_ms=20_000)
        sink.add_state("s.example", "v1", "2026-11-20", [_visit(1_000, 2_000)])
        _commit(client, sink)
        assert client.exists(visit_state.state_key("s.example", "v1", "2026-11-20")) == 0
        assert client.zcard(visit_state.ENDS) == 0

        # Flags live under their generation's prefix and go with it.
        assert client.smembers(visit_state.flags_key(7)) == {b"s.example|2026-11-20"}
        drop_generations(client, {7})
        assert client.exists(visit_state.flags_key(7)) == 0
    finally:
        visit_state.clear(client, "")
        client.close()
