"""The view definitions on Spark DataFrames, batch and streaming, against the pure-Python recount."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from contract import TimeBounds, encode
from contract.spark_schema import event_schema, parse_kafka_records
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest
from ingest.testing import InMemorySink
from tests.oracle import dedup, recount
from views import all_views, get_view, visits

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def events() -> list[Any]:
    sink = InMemorySink()
    generator = TrafficGenerator(
        GeneratorConfig(
            total=6_000, seed=9, now=NOW, span_hours=30, urls=80, visitors=800, malformed_fraction=0
        )
    )
    ingest(generator, sink, source="test", bounds=TimeBounds(now=NOW))
    return dedup(sink.events)


def _dataframe(spark: Any, events: list[Any]) -> Any:
    rows = [(e.event_id, e.ts, e.visitor_id, e.url) for e in events]
    return spark.createDataFrame(rows, "event_id string, ts timestamp, visitor_id string, url string")


def _check(rows: list[Any], expected: dict[tuple[str, str], Any]) -> None:
    from datasketches import hll_sketch

    got = {(r["key"], r["day"]): r for r in rows}
    assert set(got) == set(expected)
    for ident, b in expected.items():
        r = got[ident]
        assert (r["pv"], r["uv"]) == (b.pv, len(b.visitors))
        hours = {h["hour"]: h for h in r["hours"]}
        assert sorted(hours) == [h for h in range(24) if b.hours_pv[h]]
        for hour, h in hours.items():
            assert (h["pv"], h["uv"]) == (b.hours_pv[hour], len(b.hours_visitors[hour]))
        sketch = hll_sketch.deserialize(bytes(r["sk"]))
        assert sketch.get_lower_bound(3) <= len(b.visitors) <= sketch.get_upper_bound(3)


def test_every_registered_view_matches_the_recount(spark: Any, events: list[Any]) -> None:
    expected = recount(events)
    assert {v.name for v in all_views()} == set(expected)
    shared = visits(_dataframe(spark, events))
    for view in all_views():
        _check(view(shared, 12).collect(), expected[view.name])


def test_views_run_unchanged_on_streaming_micro_batches(
    spark: Any, events: list[Any], tmp_path: Path
) -> None:
    """The speed layer calls the same functions inside foreachBatch: prove they work there."""
    from pyspark.sql import functions as F

    source = tmp_path / "in"
    source.mkdir()
    (source / "part-0.json").write_bytes(b"\n".join(encode(e) for e in events) + b"\n")
    collected: list[Any] = []

    def each_batch(batch: Any, batch_id: int) -> None:
        collected.extend(get_view("url_traffic")(visits(batch), 12).collect())

    stream = spark.readStream.schema(event_schema()).json(str(source))
    query = (
        stream.select("event_id", F.col("ts"), "visitor_id", "url")
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    _check(collected, recount(events)["url_traffic"])


def test_parse_flags_records_that_break_the_contract(spark: Any) -> None:
    good = encode(_few_events()[0])
    future_version = orjson.dumps({**orjson.loads(good), "schema_version": 2})
    records = [good, b"{not json", b'{"event_id":"x","visitor_id":"v"}', future_version]
    df = spark.createDataFrame(
        [(v, 0, i, datetime(2026, 1, 1)) for i, v in enumerate(records)],
        "value binary, partition int, offset long, timestamp timestamp",
    )
    rows = parse_kafka_records(df).orderBy("kafka_offset").collect()
    assert rows[0]["_invalid"] is None and rows[0]["url"] is not None
    assert rows[1]["_invalid"].startswith("event_id: missing")
    assert "ts: missing" in rows[2]["_invalid"] and "url: missing" in rows[2]["_invalid"]
    assert rows[3]["_invalid"] == "schema_version: unsupported"


def _few_events() -> list[Any]:
    sink = InMemorySink()
    ingest(
        TrafficGenerator(
            GeneratorConfig(total=5, seed=1, now=NOW, malformed_fraction=0, duplicate_fraction=0)
        ),
        sink,
        source="t",
        bounds=TimeBounds(now=NOW),
    )
    return sink.events
