"""The layers' fast path: a record recognised as canonical is one the contract accepts with exactly
the values it spells, and the records ingest writes are recognised.

The cross-layer property (tests/unit/test_contract_layers.py) already compares every verdict and
value of the layers with ingest's, canonical records included; these tests pin the recogniser
itself: the pattern (Python and Java read it alike), and that it is really taken.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import ContractError, TimeBounds, decode, encode
from contract.canonical import CANONICAL_PATTERN, MAX_LENGTHS
from ingest.generator import GeneratorConfig, TrafficGenerator
from tests.unit.test_contract_layers import WINDOW, canonical_records, generated, kafka_frame, raw_records

PATTERN = re.compile(CANONICAL_PATTERN)


def within_lengths(payload: bytes) -> bool:
    record = orjson.loads(payload)
    return all(len(record.get(name) or "") <= limit for name, limit in MAX_LENGTHS.items())


@given(st.one_of(canonical_records(), raw_records()))
@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
def test_a_record_of_the_canonical_form_is_valid_and_its_own_encoding(record: tuple[bytes, datetime]) -> None:
    """Whatever matches the pattern (and the length limits it leaves to the parsed values) decodes,
    under a window wide enough to take its time, to an event that encodes back to the same bytes."""
    payload, log_time = record
    if not PATTERN.fullmatch(payload.decode("utf-8", "replace")) or not within_lengths(payload):
        return
    anywhere = TimeBounds(max_future=timedelta(days=10**5), max_past=timedelta(days=10**5), now=log_time)
    try:
        event = decode(payload, anywhere)
    except ContractError as exc:  # pragma: no cover - the failure being tested for
        raise AssertionError(f"recognised but rejected ({exc.reason}): {payload!r}") from None
    assert encode(event) == payload


def generated_events(n: int) -> list[bytes]:
    """What ingest writes for the demo's generated traffic."""
    records = TrafficGenerator(GeneratorConfig(total=n, seed=11, malformed_fraction=0.0))
    out = []
    for record in records:
        assert isinstance(record, dict)
        out.append(encode(decode(orjson.dumps(record), TimeBounds(max_past=timedelta(days=10**4)))))
    return out


def test_what_ingest_writes_matches_the_pattern() -> None:
    events = generated_events(2_000)
    assert all(PATTERN.fullmatch(e.decode()) for e in events), [
        e for e in events if not PATTERN.fullmatch(e.decode())
    ][:3]


def test_java_and_python_read_the_pattern_alike_and_ingest_records_take_the_fast_path(spark: Any) -> None:
    """Spark's regex engine matches exactly the strings Python's does, and a record ingest wrote,
    appended inside the window, is recognised: the contract's Python code is not run for it."""
    from pyspark.sql import functions as F

    from contract.spark_schema import RECOGNISED_COLUMN, recognise

    # Drawn apart, so that the canonical share does not depend on how hypothesis mixes the two:
    # about a fifth of canonical_records() come out canonical (the rest are edited past the form);
    # over 30 draws of 400, the fewest was 58.
    samples = generated(canonical_records(), 400) + generated(raw_records(), 100)
    df = kafka_frame(spark, samples)
    java = {
        r["offset"]: r["m"]
        for r in df.select(
            "offset", F.col("value").cast("string").rlike(CANONICAL_PATTERN).alias("m")
        ).collect()
    }
    python = {
        i: PATTERN.fullmatch(p.decode("utf-8", "replace")) is not None for i, (p, _) in enumerate(samples)
    }
    assert java == python
    assert sum(python.values()) >= 25, "the samples must hold plenty of canonical records"

    log_time = datetime.now().astimezone()
    # The generator spreads event times over the past hours: all inside a 30-day window.
    ingest = [(e, log_time) for e in generated_events(500)]
    flags = [r[RECOGNISED_COLUMN] for r in recognise(kafka_frame(spark, ingest), WINDOW).collect()]
    assert flags == [True] * len(ingest)
