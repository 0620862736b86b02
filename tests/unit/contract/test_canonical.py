"""The layers' fast path: a record recognised as canonical is one the contract accepts with exactly
the values it spells, and the records ingest writes are recognised.

The cross-layer property (tests/unit/contract/test_layers.py) already compares every verdict and
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
from tests.unit.contract.test_layers import WINDOW, canonical_records, generated, kafka_frame, raw_records

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


_BASE = (
    b'{"schema_version":1,"event_id":"e","ts":"2026-11-24T10:00:00Z","visitor_id":"v",'
    b'"url":"https://a.example/"}'
)

EDGES: list[tuple[bytes, bool]] = [
    (b"", False),
    (b"{}", False),
    (_BASE, True),
    (_BASE + b"\n", False),
    (_BASE.replace(b":00Z", b":00.000000Z"), False),
    (_BASE.replace(b":00Z", b":00.000100Z"), True),
    (_BASE.replace(b'"e"', '"\u00e9"'.encode()), False),
    (_BASE.replace(b"a.example", b"A.example"), False),
    (_BASE.replace(b'/"}', b'/#x"}'), False),
    (_BASE.replace(b'"v"', b'"' + b"v" * 128 + b'"'), True),
    (_BASE.replace(b'"v"', b'"' + b"v" * 129 + b'"'), False),
    (_BASE.replace(b"}", b',"country":"DE"}'), True),
    (_BASE.replace(b"}", b',"country":"De"}'), False),
    (_BASE.replace(b"}", b',"user_agent":"a\\"b"}'), False),
    (_BASE.replace(b"}", b',"user_agent":"@<>#~&|.*+?()[]{}-^ x"}'), True),
]
"""Records at the edges of the form, with whether they are canonical: where the two renderings of
the pattern would part if a character were escaped wrongly for one engine."""


def test_the_jvm_recogniser_and_python_read_the_pattern_alike_and_ingest_records_take_the_fast_path(
    spark: Any,
) -> None:
    """The DFA the layers run (compiled from AUTOMATON_PATTERN in the JVM) matches exactly the
    records Python's regex does with CANONICAL_PATTERN, and a record ingest wrote, appended inside
    the window, is recognised: the contract's Python code is not run for it."""
    from pyspark.sql import functions as F

    from contract.spark_schema import RECOGNISED_COLUMN, canonical_time, recognise

    # Drawn apart, so that the canonical share does not depend on how hypothesis mixes the two:
    # about a fifth of canonical_records() come out canonical (the rest are edited past the form);
    # over 30 draws of 400, the fewest was 58.
    now = datetime.now().astimezone()
    samples = generated(canonical_records(), 400) + generated(raw_records(), 100)
    samples += [(edge, now) for edge, _ in EDGES]
    df = kafka_frame(spark, samples)
    jvm = {
        r["offset"]: r["m"]
        for r in df.select("offset", canonical_time(spark, F.col("value")).isNotNull().alias("m")).collect()
    }
    python = {
        i: PATTERN.fullmatch(p.decode("utf-8", "replace")) is not None for i, (p, _) in enumerate(samples)
    }
    assert [python[len(samples) - len(EDGES) + i] for i in range(len(EDGES))] == [c for _, c in EDGES]
    assert jvm == python, [samples[i][0] for i in jvm if jvm[i] != python[i]][:3]
    assert sum(python.values()) >= 25, "the samples must hold plenty of canonical records"

    log_time = datetime.now().astimezone()
    # The generator spreads event times over the past hours: all inside a 30-day window.
    ingest = [(e, log_time) for e in generated_events(500)]
    flags = [r[RECOGNISED_COLUMN] for r in recognise(kafka_frame(spark, ingest), WINDOW).collect()]
    assert flags == [True] * len(ingest)


def test_a_part_the_automaton_cannot_read_alike_is_refused() -> None:
    """A new part of the pattern written with a construct the DFA's syntax lacks fails loudly
    instead of meaning something else to the layers than to the reference pattern."""
    import pytest

    from contract.canonical import _AUTOMATON, _render

    for construct in (r"(?!x)y", r"\d", "^a", r"a\b", "(?P<n>a)"):
        with pytest.raises(ValueError):
            _render(construct, _AUTOMATON)
    assert _render(r'(?:[a-z\-]{1,3}+)"@', _AUTOMATON) == r"([a-z\-]{1,3})\"\@"


def test_the_window_and_lengths_are_read_from_the_raw_bytes_exactly(spark: Any) -> None:
    """The fast path reads the event time from the bytes (after ``,"ts":"``) instead of the parsed
    record: with and without a fraction, a canonical record 2 ms inside either edge of the window is
    taken as it is, 2 ms outside it is left to the contract; so is one longer than a URL may be."""
    from contract.canonical import MAX_LENGTHS
    from contract.spark_schema import RECOGNISED_COLUMN, recognise

    def record(ts: datetime, path: str = "p") -> bytes:
        spelled = (
            ts.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ts.microsecond:06d}" if ts.microsecond else "") + "Z"
        )
        return _BASE.replace(b"2026-11-24T10:00:00Z", spelled.encode()).replace(
            b"a.example/", f"a.example/{path}".encode()
        )

    log_time = datetime.fromisoformat("2026-11-24T10:00:00.250000+00:00")
    edge_future, edge_past = log_time + WINDOW.max_future, log_time - WINDOW.max_past
    ms = timedelta(milliseconds=2)
    room = min(MAX_LENGTHS.values()) - len(record(log_time, ""))
    cases = [
        (record(edge_future - ms), True),
        (record(edge_future + ms), False),
        (record(edge_past + ms), True),
        (record(edge_past - ms), False),
        (record(log_time.replace(microsecond=0)), True),
        (record(log_time, "x" * room), True),
        (record(log_time, "x" * (room + 1)), False),
    ]
    assert all(PATTERN.fullmatch(payload.decode()) for payload, _ in cases)
    frame = kafka_frame(spark, [(payload, log_time) for payload, _ in cases])
    flags = [r[RECOGNISED_COLUMN] for r in recognise(frame, WINDOW).orderBy("offset").collect()]
    assert flags == [expected for _, expected in cases]

    # The pattern allows a 31st in every month; a date that does not exist is never read as the
    # next day's (which would be inside this window), it goes to the contract's check.
    no_such_day = _BASE.replace(b"2026-11-24T10:00:00Z", b"2026-11-31T10:00:00Z")
    assert PATTERN.fullmatch(no_such_day.decode())
    next_day = datetime.fromisoformat("2026-12-01T10:00:00+00:00")
    [row] = recognise(kafka_frame(spark, [(no_such_day, next_day)]), WINDOW).collect()
    assert row[RECOGNISED_COLUMN] is False
