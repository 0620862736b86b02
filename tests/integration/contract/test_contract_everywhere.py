"""The contract holds in every layer, for records that never went through ingest.

Records written straight to `events` next to normal traffic: every invalid one is dead-lettered by
the batch layer and by the speed layer with the reason ingest gives, and counted by neither; every
valid one counts under its canonical URL. A crash between dead-lettering and committing repeats
dead letters under the same key.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
import redis
from confluent_kafka import Producer

from batch_layer.job import BatchJob
from config.settings import Settings
from contract import ContractError, decode, normalize_url
from contract.codec import reason_field
from contract.events import MAX_ID_LENGTH, MAX_URL_LENGTH
from ingest.producer import DLQ_KEY_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER, dlq_key
from ingest.topics import log_end_offsets, log_start_offsets
from speed_layer.job import SpeedJob
from stores.redis import keys
from tests.integration.conftest import (
    assert_matches_oracle,
    assert_merged_matches,
    assert_realtime_matches,
    produce,
    realtime_documents,
    served_documents,
    traffic,
)
from tests.integration.ingest.test_ingest_kafka import consume_all
from tests.oracle import first_copies, read_log, recount, recount_past


def _ts(delta: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) + delta).isoformat()


def invalid_records(tag: str) -> list[bytes]:
    """One record per kind of breach; ``tag`` keeps the two waves' event ids apart."""
    base = {"event_id": f"bad-{tag}", "ts": _ts(), "visitor_id": "v-bad", "url": "https://shop.example.com/x"}

    def with_(**changes: Any) -> bytes:
        return orjson.dumps({**base, **changes})

    def without(name: str) -> bytes:
        return orjson.dumps({k: v for k, v in base.items() if k != name})

    return [
        b"{not json",
        b"",
        b"[1, 2]",
        b"\xff\xfe\x00{",
        without("ts"),
        without("url"),
        with_(event_id="x" * (MAX_ID_LENGTH + 1)),
        with_(event_id=f"has space {tag}"),
        with_(visitor_id=42),
        with_(url="ftp://shop.example.com/"),
        with_(url="https:///nohost"),
        with_(url="https://user:pw@shop.example.com/"),
        with_(url="https://shop.example.com/" + "x" * MAX_URL_LENGTH),
        with_(url="https://shop example.com/"),
        with_(referrer="javascript:alert(1)"),
        with_(country="DEU"),
        with_(user_agent="bad\x01agent"),
        with_(user_agent="a" * 600),
        with_(schema_version=2),
        with_(campaign="spring"),
        with_(ts=datetime.now(UTC).replace(tzinfo=None).isoformat()),
        with_(ts=_ts(timedelta(hours=1))),
        with_(ts=_ts(timedelta(days=-40))),
        with_(ts="yesterday"),
        with_(event_id=f"big-{tag}", user_agent="a" * 20_000),
    ]


def valid_records(tag: str) -> list[bytes]:
    """Twenty valid records in spellings ingest never produces."""
    spellings: list[tuple[str, dict[str, Any]]] = [
        ("HTTPS://Shop.Example.com:443/p/4#top", {}),
        ("https://SHOP.example.COM/p/4", {"country": "de"}),
        ("http://blog.example.com:80", {}),
        ("HTTP://Blog.Example.Com", {"referrer": ""}),
        ("https://shop.example.com:443", {"user_agent": ""}),
        ("https://shop.example.com/Cart?X=1#frag", {"referrer": "HTTPS://WWW.Google.com:443/#q"}),
        ("https://shop.example.com./p/5", {}),
        ("  https://shop.example.com/p/6  ", {}),
        ("https://shop.example.com:8443/p/7", {"country": "fr"}),
        ("Https://Shop.Example.Com/p/8#", {}),
        ("https://shop.example.com/p/9?", {}),
        ("https://shop.example.com/%7Euser", {}),
        ("https://shop.example.com/p/4", {"ts_offset": "+05:30"}),
        ("https://shop.example.com/p/4", {"ts_offset": "-08:00"}),
        ("https://shop.example.com/p/4", {"schema_version": 1}),
        ("https://shop.example.com/p/4", {"referrer": None, "country": None, "user_agent": None}),
        ("https://shop.example.com/p/10", {"user_agent": "Mozilla/5.0 (X11) \u00e9t\u00e9"}),
        ("https://shop.example.com/\u00e9t\u00e9", {}),
        ("http://shop.example.com:443/p/11", {}),
        ("https://BLOG.example.com/Post/1#comments", {"country": "Gb"}),
    ]
    out = []
    for i, (url, extra) in enumerate(spellings):
        offset = extra.pop("ts_offset", None)
        ts = datetime.now(UTC) - timedelta(minutes=i)
        record: dict[str, Any] = {
            "url": url,
            "visitor_id": f"odd-visitor-{i % 4}",
            "event_id": f"odd-{tag}-{i}",
            "ts": ts.astimezone(datetime.fromisoformat(f"2026-01-01T00:00:00{offset}").tzinfo).isoformat()
            if offset
            else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            **extra,
        }
        out.append(
            orjson.dumps(record) if i % 2 else b"  " + orjson.dumps(record, option=orjson.OPT_INDENT_2)
        )
    return out


def produce_raw(settings: Settings, payloads: list[bytes]) -> None:
    raw = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for i, payload in enumerate(payloads):
        raw.produce(settings.events_topic, payload, key=f"bypass-{i}".encode())
    assert raw.flush(30) == 0


def ingest_reason(payload: bytes) -> str:
    with pytest.raises(ContractError) as rejected:
        decode(payload)
    return rejected.value.reason


def dead_letters(settings: Settings, source: str) -> list[Any]:
    return [
        m
        for m in consume_all(settings, settings.dlq_topic)
        if dict(m.headers())[DLQ_SOURCE_HEADER] == source.encode()
    ]


def assert_dead_lettered_once_each(settings: Settings, source: str, invalid: list[bytes]) -> None:
    """Each invalid record in the DLQ from ``source`` with ingest's reason, once per key; a crash
    repeat carries the key of the first."""
    by_key: dict[str, set[tuple[bytes, str]]] = {}
    for m in dead_letters(settings, source):
        headers = dict(m.headers())
        key = headers[DLQ_KEY_HEADER].decode()
        assert m.key() == headers[DLQ_KEY_HEADER]
        assert key.startswith(f"{source}:{settings.events_topic}:")
        by_key.setdefault(key, set()).add((m.value() or b"", headers[DLQ_REASON_HEADER].decode()))
    assert all(len(v) == 1 for v in by_key.values()), "one key, one record"
    letters = sorted(next(iter(v)) for v in by_key.values())
    assert letters == sorted((p, ingest_reason(p)) for p in invalid)


def test_records_that_bypassed_ingest_are_judged_by_the_whole_contract_in_both_layers(
    platform: Settings, spark: Any
) -> None:
    # Wave 1: normal traffic, invalid records and odd spellings straight to `events`.
    events = produce(platform, traffic(seed=21, total=1_500, span_hours=3, malformed_fraction=0.0))
    invalid_1, valid_1 = invalid_records("a"), valid_records("a")
    assert len(set(invalid_1)) >= 15 and len(valid_1) == 20
    produce_raw(platform, invalid_1 + valid_1)
    events += [decode(p) for p in valid_1]

    job = BatchJob(platform, spark)
    try:
        # A crash after the absorb sent its dead letters and before the segment was committed: the
        # next run absorbs the same range again and sends the same dead letters under the same keys.
        cut = log_end_offsets(platform)
        repeated: list[str] = []
        orphan = job.master.absorb(
            spark,
            10_000,
            cut,
            log_start_offsets(platform),
            lambda payload, reason, p, o: repeated.append(
                dlq_key("batch-absorb", platform.events_topic, p, o)
            ),
        )
        assert orphan is not None and len(repeated) == len(invalid_1)

        first = job.run()
        assert (first.events_absorbed, first.invalid_records) == (len(events), len(invalid_1))
        expected_reasons = Counter(reason_field(ingest_reason(p)) for p in invalid_1)
        assert first.invalid_reasons == dict(expected_reasons)
        assert_matches_oracle(served_documents(platform), recount(events))
        batch_letters = dead_letters(platform, "batch-absorb")
        assert sorted(dict(m.headers())[DLQ_KEY_HEADER].decode() for m in batch_letters) == sorted(repeated)
        assert_dead_lettered_once_each(platform, "batch-absorb", invalid_1)

        # Canonical URLs only: the odd spellings count under the URL ingest would have produced.
        url_keys = {key for key, _ in served_documents(platform)["page"]}
        assert {decode(p).url for p in valid_1} <= url_keys
        assert "https://shop.example.com/p/4" in url_keys
        assert all(normalize_url(k) == k for k in url_keys)

        # Wave 2, past the cut: the speed layer counts it; it dead-letters wave 1's records too (it
        # reads from one dedup window before the cut).
        more = produce(platform, traffic(seed=22, total=1_000, span_hours=0.0, malformed_fraction=0.0))
        invalid_2, valid_2 = invalid_records("b"), valid_records("b")
        produce_raw(platform, invalid_2 + valid_2)
        events += more + [decode(p) for p in valid_2]

        class CrashBeforeCommit(SpeedJob):
            """Dies after a micro-batch's dead letters went out, before its Redis commit."""

            def _commit(self, *args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("crash before the Redis commit")

        with pytest.raises(Exception, match="crash before the Redis commit"):
            CrashBeforeCommit(platform, spark).run(available_now=True)
        crashed = dead_letters(platform, "speed-layer")
        assert crashed, "the crashed batch sent its dead letters"
        SpeedJob(platform, spark).run(available_now=True)
        speed_letters = dead_letters(platform, "speed-layer")
        keys_after = Counter(dict(m.headers())[DLQ_KEY_HEADER] for m in speed_letters)
        assert all(keys_after[dict(m.headers())[DLQ_KEY_HEADER]] == 2 for m in crashed), "repeats share a key"
        assert_dead_lettered_once_each(platform, "speed-layer", invalid_1 + invalid_2)

        r = redis.Redis(host=platform.redis_host, port=platform.redis_port, db=platform.redis_db)
        try:
            stats = json.loads(r.get(keys.SPEED_STATS) or "{}")
        finally:
            r.close()
        all_reasons = Counter(reason_field(ingest_reason(p)) for p in invalid_1 + invalid_2)
        assert stats["invalid_reasons_total"] == dict(all_reasons)  # the repeat counted once
        assert stats["invalid_total"] == len(invalid_1) + len(invalid_2)

        gen, served_cut = first.gen, job.registry.served().cut
        log = read_log(platform.kafka_bootstrap, platform.events_topic)
        assert sum(1 for rec in log if rec.event is None) == len(invalid_1) + len(invalid_2)
        assert_realtime_matches(realtime_documents(platform, gen), recount_past(log, served_cut))
        assert_merged_matches(platform, recount(r.event for r in first_copies(log) if r.event))

        # The next generation absorbs wave 2: the batch layer dead-letters its records once too.
        second = job.run()
        assert second.invalid_records == len(invalid_2)
        assert second.dead_letters_total == dict(all_reasons)
        assert_matches_oracle(served_documents(platform), recount(events))
        assert_dead_lettered_once_each(platform, "batch-absorb", invalid_1 + invalid_2)
    finally:
        job.close()
