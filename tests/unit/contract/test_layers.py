"""The contract holds in every layer: ingest, the batch absorb and the speed stream give every raw
record the same verdict, the same reason and the same normalised values.

Both layers read the log through ``parse_kafka_records``; the property runs it over a DataFrame of
generated Kafka records (raw bytes and a log-append time) and compares each row with what ingest
(``contract.decode`` judged at that log time) makes of the same bytes. It runs both ways the layers
call it: in one pass (the speed stream) and in the batch absorb's two (recognise, then judge only
the records not recognised). Hypothesis generates whole
lists of records, so one Spark job judges a few hundred of them at once.
"""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from contract import ContractError, TimeBounds, decode, encode
from contract.codec import MAX_PAYLOAD_BYTES
from contract.events import MAX_ID_LENGTH, MAX_URL_LENGTH, MAX_USER_AGENT_LENGTH, PageView
from contract.utc import epoch_seconds
from tests.unit.contract.test_contract import raw_urls

LOG_BASE = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
WINDOW = TimeBounds(max_future=timedelta(minutes=5), max_past=timedelta(days=30))
FIELDS = list(PageView.model_fields)

ints = st.integers(-(2**53), 2**53)
id_chars = string.ascii_letters + string.digits + "._:@-"
identifiers = st.one_of(
    st.text(alphabet=id_chars, min_size=1, max_size=12),
    st.sampled_from(["a" * MAX_ID_LENGTH, "b" * (MAX_ID_LENGTH + 1), "", "has space", "é", "x\n"]),
    ints,
    st.none(),
    st.lists(ints, max_size=2),
)
odd_urls = st.sampled_from(
    [
        "HTTPS://Shop.Example.com:443/p/4#top",
        "http://Example.COM",
        "http://example.com:80/",
        "https://example.com:8443/A?Q=1#f",
        "https://example.com./x",
        "ftp://example.com/",
        "https:///nohost",
        "https://exa mple.com/",
        "https://bücher.de/",
        "https://user:pw@example.com/",
        "https://example.com:99999/",
        "https://-bad-.com/",
        "  https://padded.example/  ",
        "javascript:alert(1)",
        "",
        "https://example.com/" + "x" * (MAX_URL_LENGTH - len("https://example.com/")),
        "https://example.com/" + "x" * (MAX_URL_LENGTH - len("https://example.com/") + 1),
        "https://example.com/\u00e9t\u00e9",
    ]
)
urls = st.one_of(raw_urls(), odd_urls, ints, st.none())
user_agents = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        ["", "u" * MAX_USER_AGENT_LENGTH, "u" * (MAX_USER_AGENT_LENGTH + 1), "tab\there", "\x7f"]
    ),
    ints,
)
countries = st.one_of(st.sampled_from(["us", "DE", "Fr", "", "DEU", "1a", "ß", "d"]), st.none(), ints)
offsets = st.sampled_from(
    [
        UTC,
        timezone(timedelta(hours=2)),
        timezone(timedelta(hours=-7, minutes=-30)),
        timezone(timedelta(hours=14)),
    ]
)


@st.composite
def event_times(draw: st.DrawFn, log_time: datetime, clean: bool = False) -> Any:
    """Event times around the window's edges (relative to the record's log time), in many spellings
    (``clean``: only spellings the contract accepts)."""
    edge = draw(
        st.sampled_from(
            [
                timedelta(0),
                timedelta(minutes=5),
                timedelta(minutes=-5),
                timedelta(days=-30),
                timedelta(days=-29),
            ]
        )
    )
    jitter = timedelta(microseconds=draw(st.integers(-2_000_000, 2_000_000)))
    instant = log_time + edge + jitter
    spellings = ["iso", "Z", "epoch", "space"] + ([] if clean else ["naive", "junk", "date"])
    spelling = draw(st.sampled_from(spellings))
    local = instant.astimezone(draw(offsets))
    if spelling == "iso":
        return local.isoformat()
    if spelling == "Z":
        return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if spelling == "naive":
        return instant.replace(tzinfo=None).isoformat()
    if spelling == "epoch":
        return int(instant.timestamp())
    if spelling == "space":
        return local.isoformat(sep=" ")
    if spelling == "date":
        return instant.date().isoformat()
    return draw(st.sampled_from(["yesterday", "", "2026-13-01T00:00:00Z", None, [1]]))


CANONICAL_EDITS: list[tuple[bytes, bytes]] = [
    (b"://", b"://W"),  # an upper-case host
    (b'","ts"', b'#","ts"'),  # an identifier character the contract rejects
    (b'Z","visitor_id"', b'.000000Z","visitor_id"'),  # a zero fraction, which encode omits
    (b'Z","visitor_id"', b'+00:00","visitor_id"'),
    (b',"ts"', b', "ts"'),  # whitespace
    (b'"event_id":"', b'"event_id":"\\u0061'),  # an escape
    (b'"country":"', b'"country":"x'),
    (b'"user_agent":"', b'"user_agent":"\xc3\xa9'),
    (b'"}', b'","extra":1}'),
    (b'{"schema_version":1,', b"{"),
    (b'/","', b'/?","'),  # an empty query, which normalising drops
    (b'/","', b'/#f","'),  # a fragment
    (b".com/", b".com:443/"),  # a default port
    (b".com/", b".com:8080/"),  # a port the fast path leaves to the contract
    (b".com/", b".com./"),  # a trailing dot
    (b"http", b"HTTP"),
    (b"1,", b"2,"),  # another schema version
]
"""Edits of a canonical record at the edges of the canonical form (a few keep it canonical)."""


@st.composite
def canonical_records(draw: st.DrawFn) -> tuple[bytes, datetime]:
    """(raw Kafka value, log-append time): records in the exact form ingest writes (what the layers
    recognise without Python), some edited just past the edge of that form, with event times at
    the edges of the window."""
    log_time = LOG_BASE + timedelta(milliseconds=draw(st.integers(-(10**9), 10**9)))
    fine_ids = st.one_of(st.text(alphabet=id_chars, min_size=1, max_size=12), st.just("a" * MAX_ID_LENGTH))
    record: dict[str, Any] = {
        "event_id": draw(fine_ids),
        "ts": draw(event_times(log_time, clean=True)),
        "visitor_id": draw(fine_ids),
        "url": draw(
            st.one_of(raw_urls(), st.sampled_from(["https://shop.example.com/p/1?q=a?b", "http://a.com/"]))
        ),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "referrer": st.one_of(raw_urls(), st.just("")),
        "user_agent": st.text(alphabet=string.printable.strip() + " ", max_size=40),
        "country": st.sampled_from(["us", "DE", ""]),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            record[name] = draw(strategy)
    # Judged against a window one second wider on each side, so that some land just outside the
    # layers' window: the fast path must leave those to the contract.
    wide = TimeBounds(
        max_future=WINDOW.max_future + timedelta(seconds=1),
        max_past=WINDOW.max_past + timedelta(seconds=1),
        now=log_time,
    )
    try:
        payload = encode(decode(orjson.dumps(record), wide))
    except ContractError:
        return orjson.dumps(record), log_time
    if draw(st.booleans()):
        old, new = draw(st.sampled_from(CANONICAL_EDITS))
        payload = payload.replace(old, new, 1)
    if draw(st.integers(0, 15)) == 0:
        payload += draw(st.sampled_from([b"\n", b" ", b"\r\n"]))  # valid JSON, not canonical
    return payload, log_time


@st.composite
def raw_records(draw: st.DrawFn) -> tuple[bytes, datetime]:
    """(raw Kafka value, log-append time): valid, invalid and borderline records."""
    log_time = LOG_BASE + timedelta(milliseconds=draw(st.integers(-(10**9), 10**9)))
    # A quarter are canonical or just past it, half well-formed (valid unless an edge or a limit
    # says otherwise), the rest adversarial, so every list holds plenty of every kind.
    kind = draw(st.integers(0, 3))
    if kind == 3:
        return draw(canonical_records())
    if kind > 0:
        fine_ids = st.one_of(
            st.text(alphabet=id_chars, min_size=1, max_size=12), st.just("a" * MAX_ID_LENGTH)
        )
        record: dict[str, Any] = {
            "event_id": draw(fine_ids),
            "ts": draw(event_times(log_time, clean=True)),
            "visitor_id": draw(fine_ids),
            "url": draw(raw_urls()),
        }
        fine: dict[str, st.SearchStrategy[Any]] = {
            "referrer": st.one_of(raw_urls(), st.just("")),
            "user_agent": st.text(alphabet=string.printable.strip() + " \u00e9", max_size=40),
            "country": st.sampled_from(["us", "DE", "Fr", ""]),
        }
        for name, strategy in fine.items():
            if draw(st.booleans()):
                record[name] = draw(strategy)
        return orjson.dumps(record), log_time
    record = {
        "event_id": draw(st.one_of(st.text(alphabet=id_chars, min_size=1, max_size=12), identifiers)),
        "ts": draw(event_times(log_time)),
        "visitor_id": draw(st.one_of(st.text(alphabet=id_chars, min_size=1, max_size=12), identifiers)),
        "url": draw(st.one_of(raw_urls(), urls)),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "referrer": st.one_of(urls, st.just("")),
        "user_agent": user_agents,
        "country": countries,
    }
    for name, option in optional.items():
        if draw(st.booleans()):
            record[name] = draw(option)
    if draw(st.integers(0, 4)) == 0:
        record["schema_version"] = draw(st.sampled_from([1, 2, "1", None, 1.0]))
    if draw(st.integers(0, 4)) == 0:
        record[draw(st.sampled_from(["campaign", "URL", "site"]))] = draw(st.sampled_from(["x", 1, None]))
    if draw(st.integers(0, 9)) == 0:
        record.pop(draw(st.sampled_from(["event_id", "ts", "visitor_id", "url"])))
    keys = draw(st.permutations(list(record)))
    payload = orjson.dumps({k: record[k] for k in keys})
    damage = draw(st.integers(0, 19))
    if damage == 0:
        payload = payload[: draw(st.integers(0, len(payload)))]
    elif damage == 1:
        payload = draw(
            st.sampled_from(
                [b"\xff\xfe", b"null", b"[]", b"{}", b'"x"', b"", b"{" + b" " * MAX_PAYLOAD_BYTES + b"}"]
            )
        )
    elif damage == 2:
        payload = payload.replace(b"{", b'{"event_id":"dup",', 1)  # a repeated key
    return payload, log_time


def ingest_verdict(payload: bytes, log_time: datetime) -> tuple[str | None, dict[str, Any] | None]:
    """What ingest makes of the record had it validated it when the broker appended it."""
    bounds = TimeBounds(max_future=WINDOW.max_future, max_past=WINDOW.max_past, now=log_time)
    try:
        event = decode(payload, bounds)
    except ContractError as exc:
        return exc.reason, None
    values = dict(event.__dict__)
    values["ts"] = (event.ts - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return None, values


def generated(strategy: st.SearchStrategy[tuple[bytes, datetime]], n: int) -> list[tuple[bytes, datetime]]:
    """``n`` examples of ``strategy`` as a list, for one Spark job to judge them all (a job per
    example would cost seconds each)."""
    records: list[tuple[bytes, datetime]] = []

    @given(strategy)
    @settings(
        max_examples=n,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def collect(record: tuple[bytes, datetime]) -> None:
        records.append(record)

    collect()
    return records


def kafka_frame(spark: Any, records: list[tuple[bytes, datetime]]) -> Any:
    """(raw value, log-append time) records as the Kafka source's rows, offsets in list order."""
    rows = [(payload, 0, offset, log_time) for offset, (payload, log_time) in enumerate(records)]
    return spark.createDataFrame(rows, "value binary, partition int, offset long, timestamp timestamp")


@pytest.fixture(scope="module")
def judged(spark: Any) -> Any:
    """Records -> what parse_kafka_records makes of them, in one pass and in two (which must
    agree), one Spark job per list and way."""
    from pyspark.sql import functions as F

    from contract.spark_schema import (
        INVALID_COLUMN,
        UNJUDGED,
        event_schema,
        kafka_rows_of,
        parse_kafka_records,
    )

    def judge(records: list[tuple[bytes, datetime]]) -> list[tuple[str | None, dict[str, Any] | None]]:
        frame = kafka_frame(spark, records)
        first = parse_kafka_records(frame, WINDOW, judge=False)
        unjudged = F.col(INVALID_COLUMN).eqNullSafe(F.lit(UNJUDGED))
        two_passes = first.where(~unjudged).unionByName(
            parse_kafka_records(kafka_rows_of(first.where(unjudged)), WINDOW)
        )
        one_pass = rows_of(parse_kafka_records(frame, WINDOW), records)
        assert rows_of(two_passes, records) == one_pass
        return one_pass

    def rows_of(
        judged_df: Any, records: list[tuple[bytes, datetime]]
    ) -> list[tuple[str | None, dict[str, Any] | None]]:
        from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, TimestampType

        # The contract's columns, the record's log position, its bytes and the verdict.
        assert [(f.name, f.dataType) for f in judged_df.schema] == [
            *((f.name, f.dataType) for f in event_schema().fields),
            ("kafka_partition", IntegerType()),
            ("kafka_offset", LongType()),
            ("log_time", TimestampType()),
            ("_raw", BinaryType()),
            (INVALID_COLUMN, StringType()),
        ]
        parsed = judged_df.select(
            *[F.unix_micros("ts").alias("ts") if n == "ts" else F.col(n) for n in FIELDS],
            "kafka_offset",
            "_raw",
            INVALID_COLUMN,
        )
        out: list[tuple[str | None, dict[str, Any] | None]] = []
        for row in sorted(parsed.collect(), key=lambda r: r["kafka_offset"]):
            assert bytes(row["_raw"]) == records[row["kafka_offset"]][0]
            if row[INVALID_COLUMN] is not None:
                assert all(row[n] is None for n in FIELDS)
                out.append((row[INVALID_COLUMN], None))
            else:
                out.append((None, {n: row[n] for n in FIELDS}))
        return out

    return judge


def test_ingest_and_both_layers_agree_on_every_record(judged: Any) -> None:
    """Hypothesis generates the records; one Spark job judges them all (a job per example would
    cost seconds each), and every disagreement is reported with its record."""
    records = generated(raw_records(), 400)
    layers = judged(records)
    assert len(layers) == len(records) >= 250
    verdicts = [ingest_verdict(payload, log_time) for payload, log_time in records]
    assert {reason is None for reason, _ in verdicts} == {True, False}, "valid and invalid records both"
    mismatches = [
        (payload, log_time, layer, ingest)
        for (payload, log_time), layer, ingest in zip(records, layers, verdicts, strict=True)
        if layer != ingest
    ]
    assert not mismatches, mismatches[:5]


def test_canonical_url_and_time_window_examples(judged: Any) -> None:
    """The issue's own example, and the window judged against the log time, not the clock."""
    log_time = datetime(2020, 1, 1, 12, 0, tzinfo=UTC)  # years ago: the clock would reject all
    base = {"event_id": "e1", "visitor_id": "v1", "url": "HTTPS://Shop.Example.com:443/p/4#top"}
    records = [
        (orjson.dumps({**base, "ts": "2020-01-01T12:04:59Z", "country": "de"}), log_time),
        (orjson.dumps({**base, "ts": "2020-01-01T12:05:01Z"}), log_time),
        (orjson.dumps({**base, "ts": "2019-12-02T11:59:59Z"}), log_time),
        (orjson.dumps({**base, "ts": "2019-12-02T12:00:00Z", "referrer": ""}), log_time),
    ]
    (ok, future, past, edge) = judged(records)
    assert ok[0] is None and ok[1] is not None
    assert (ok[1]["url"], ok[1]["country"]) == ("https://shop.example.com/p/4", "DE")
    assert future == ("ts: is more than 300 s in the future", None)
    assert past == ("ts: is more than 30 days in the past", None)
    assert edge[0] is None and edge[1] is not None and edge[1]["referrer"] is None


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
@settings(max_examples=500)
def test_utc_epoch_seconds_is_exactly_timestamp(naive: datetime) -> None:
    aware = naive.replace(tzinfo=UTC)
    assert epoch_seconds(aware) == aware.timestamp()
    parsed = PageView.model_validate(
        {"event_id": "e", "visitor_id": "v", "url": "https://a.b/", "ts": aware.isoformat()},
        context={"bounds": TimeBounds(max_future=timedelta.max / 2, max_past=timedelta.max / 2)},
    ).ts
    assert epoch_seconds(parsed) == parsed.timestamp()
