"""Dead-letter accounting: the DLQ tally of the API and the metrics it exposes."""

from __future__ import annotations

from api.kafka import DlqTally
from api.metrics import ApiMetrics
from config.settings import Settings
from contract.codec import reason_field
from ingest.producer import DLQ_KEY_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER, dlq_key


def headers(source: str, reason: str, key: str | None = None) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {DLQ_SOURCE_HEADER: source.encode(), DLQ_REASON_HEADER: reason.encode()}
    if key is not None:
        out[DLQ_KEY_HEADER] = key.encode()
    return out


def test_reason_field_is_the_clause_before_the_first_colon() -> None:
    assert reason_field("url: scheme must be http or https; ts: missing") == "url"
    assert reason_field("event: Invalid JSON: EOF") == "event"


def test_dlq_key_names_source_topic_partition_and_offset() -> None:
    assert dlq_key("speed-layer", "events", 3, 1041) == "speed-layer:events:3:1041"


def test_tally_counts_per_source_and_field_and_drops_crash_repeats_by_key() -> None:
    tally = DlqTally(Settings())
    key = dlq_key("batch-absorb", "events", 0, 7)
    tally._count(headers("batch-absorb", "url: must have a host", key))
    tally._count(headers("batch-absorb", "url: must have a host", key))  # a crash repeat
    tally._count(headers("speed-layer", "url: must have a host", dlq_key("speed-layer", "events", 0, 7)))
    tally._count(headers("ingest", "ts: is more than 30 days in the past"))
    tally._count(headers("ingest", "ts: is more than 30 days in the past"))  # no key: two rejects
    assert tally.snapshot() == {"batch-absorb": {"url": 1}, "speed-layer": {"url": 1}, "ingest": {"ts": 2}}


def test_metrics_expose_dead_letters_per_source_and_reason() -> None:
    metrics = ApiMetrics()
    metrics.dead_letters.update(
        {"batch_absorb": {"url": 2}, "speed_layer": {"ts": 1}, "in_dlq": {"ingest": {"country": 3}}}
    )
    text = metrics.render().decode()
    assert 'lambda_layer_dead_letters{reason="url",source="batch-absorb"} 2.0' in text
    assert 'lambda_layer_dead_letters{reason="ts",source="speed-layer"} 1.0' in text
    assert 'lambda_dlq_records{reason="country",source="ingest"} 3.0' in text
