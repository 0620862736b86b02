"""The ingest path on in-memory sinks: generator shapes, replay formats, nothing dropped."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from contract import TimeBounds, decode
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest
from ingest.replay import read_file
from ingest.testing import InMemorySink

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BOUNDS = TimeBounds(now=NOW)


def _run(records: object, sink: InMemorySink | None = None) -> InMemorySink:
    sink = sink or InMemorySink()
    ingest(records, sink, source="test", bounds=BOUNDS)
    return sink


def test_generator_counts_add_up_and_every_malformed_record_is_rejected() -> None:
    config = GeneratorConfig(total=20_000, seed=7, now=NOW, duplicate_fraction=0.05, malformed_fraction=0.02)
    generator = TrafficGenerator(config)
    sink = _run(generator)
    stats = generator.stats
    assert stats.originals + stats.duplicates + stats.malformed == 20_000
    assert len(sink.events) == stats.valid
    assert len(sink.dead_letters) == stats.malformed
    assert sink.flushes == 1
    # duplicates reuse event ids; originals are unique
    ids = Counter(e.event_id for e in sink.events)
    assert len(ids) == stats.originals
    assert sum(ids.values()) - len(ids) == stats.duplicates
    assert 0.03 < stats.duplicates / 20_000 < 0.07
    assert 0.01 < stats.malformed / 20_000 < 0.03
    assert set(stats.malformed_kinds) == {
        "truncated-json",
        "not-an-object",
        "missing-visitor",
        "missing-ts",
        "bad-scheme",
        "naive-ts",
        "far-future",
        "huge-visitor-id",
        "bad-country",
        "unknown-field",
        "wrong-version",
    }
    assert all(d.reason and d.payload for d in sink.dead_letters)


def test_generator_is_reproducible_with_a_seed() -> None:
    def first(seed: int) -> list[object]:
        return list(TrafficGenerator(GeneratorConfig(total=500, seed=seed, now=NOW)))

    assert first(1) == first(1)
    assert first(1) != first(2)


def test_generator_shapes_zipf_late_and_out_of_order() -> None:
    config = GeneratorConfig(
        total=30_000,
        seed=3,
        now=NOW,
        late_fraction=0.02,
        out_of_order_fraction=0.1,
        malformed_fraction=0,
        duplicate_fraction=0,
    )
    generator = TrafficGenerator(config)
    events = _run(generator).events
    by_url = Counter(e.url for e in events).most_common()
    assert by_url[0][1] > 20 * by_url[100][1]  # Zipf: the head is far above the tail
    late = [e for e in events if e.ts < NOW - timedelta(minutes=59)]
    assert len(late) == generator.stats.late
    ooo = [e for e in events if NOW - timedelta(minutes=6) < e.ts < NOW]
    assert len(ooo) == generator.stats.out_of_order
    visitors = Counter(e.visitor_id for e in events)
    assert max(visitors.values()) >= 3  # sessions: visitors view several pages


def test_backfill_spreads_event_time_with_a_diurnal_shape() -> None:
    config = GeneratorConfig(
        total=48_000,
        seed=5,
        now=NOW,
        span_hours=48,
        late_fraction=0,
        out_of_order_fraction=0,
        malformed_fraction=0,
        duplicate_fraction=0,
    )
    events = _run(TrafficGenerator(config)).events
    assert min(e.ts for e in events) >= NOW - timedelta(hours=48)
    assert max(e.ts for e in events) <= NOW
    per_hour = Counter(e.ts.hour for e in events)
    assert per_hour[15] > 2.5 * per_hour[3]  # afternoon peak, night trough


def test_replay_jsonl_and_csv_keep_bad_lines_verbatim(tmp_path: Path) -> None:
    good = {"event_id": "a1", "ts": "2026-06-01T10:00:00Z", "visitor_id": "v1", "url": "https://x.example/"}
    jsonl = tmp_path / "events.jsonl"
    jsonl.write_bytes(
        orjson.dumps(good) + b"\n\n{broken\n" + orjson.dumps({**good, "url": "ftp://x"}) + b"\n"
    )
    sink = _run(read_file(jsonl))
    assert [e.event_id for e in sink.events] == ["a1"]
    assert [d.payload for d in sink.dead_letters] == [b"{broken", orjson.dumps({**good, "url": "ftp://x"})]
    assert sink.dead_letters[1].reason.startswith("url:")

    csv_file = tmp_path / "events.csv"
    csv_file.write_text(
        "event_id,ts,visitor_id,url,country\n"
        "c1,2026-06-01T10:00:00Z,v1,HTTPS://X.example/a,de\n"
        "c2,2026-06-01T10:00:00Z,v1\n"
        'c3,not-a-time,v2,"https://x.example/b,c",\n'
    )
    sink = _run(read_file(csv_file))
    assert [(e.event_id, e.url, e.country) for e in sink.events] == [("c1", "https://x.example/a", "DE")]
    assert [d.payload for d in sink.dead_letters] == [
        b"c2,2026-06-01T10:00:00Z,v1",
        b'c3,not-a-time,v2,"https://x.example/b,c",',
    ]
    assert "CSV columns" in sink.dead_letters[0].reason
    assert sink.dead_letters[1].reason.startswith("ts:")


def test_replay_rejects_unknown_file_types(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsupported"):
        read_file(tmp_path / "events.parquet")


def test_generated_valid_records_round_trip_through_the_wire_form() -> None:
    sink = _run(TrafficGenerator(GeneratorConfig(total=2_000, seed=11, now=NOW)))
    from contract import encode

    for event in sink.events[:500]:
        assert decode(encode(event), BOUNDS) == event
