"""The view definitions on Spark DataFrames, batch and streaming, against the pure-Python recount."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from contract import ContractError, TimeBounds, decode, encode
from contract.spark_schema import event_schema, parse_kafka_records
from ingest.generator import GeneratorConfig, TrafficGenerator
from ingest.pipeline import ingest
from ingest.testing import InMemorySink
from tests.oracle import dedup, recount
from views import Dimension, all_views, compute, declared, fingerprint, get_view, input_columns

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LAYOUT = "the stored layout"
"""What the views are fingerprinted as stored in (views.registry.pass_fingerprint)."""


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
    rows = [(e.event_id, e.ts, e.visitor_id, e.url, e.referrer, e.user_agent, e.country) for e in events]
    return spark.createDataFrame(
        rows,
        "event_id string, ts timestamp, visitor_id string, url string, referrer string, "
        "user_agent string, country string",
    )


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


def _by_view(rows: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in rows:
        out.setdefault(r["view"], []).append(r)
    return out


def test_every_shipped_dimension_matches_the_recount(spark: Any, events: list[Any]) -> None:
    expected = recount(events)
    assert {v.name for v in all_views()} == {*expected, "entry_page", "exit_page"}
    assert set(expected) == {  # views of page views
        *("page", "site", "referrer", "country", "device"),
        *("utm_source", "utm_medium", "utm_campaign", "channel"),
    }
    rows = _by_view(compute(_dataframe(spark, events), all_views(), 12).collect())
    for name, buckets in expected.items():
        _check(rows[name], buckets)
    # The generated traffic exercises every kind of value the shipped dimensions have.
    referrers = {k.split("|", 1)[1] for k, _ in expected["referrer"]}
    assert {"(direct)", "(internal)"} <= referrers and len(referrers) > 3
    assert {k.split("|", 1)[1] for k, _ in expected["device"]} >= {"desktop", "mobile", "tablet", "bot"}
    assert "(unknown)" in {k.split("|", 1)[1] for k, _ in expected["country"]}
    # ... and of the campaigns': every channel the generator sends, the UTM values normalised, the
    # pages without their utm_* parameters and click ids.
    channels = {k.split("|", 1)[1] for k, _ in expected["channel"]}
    assert channels >= {"Direct", "Internal", "Organic Search", "Organic Social", "Email", "Paid Search"}
    assert channels >= {"Paid Social", "Referral", "Organic Video", "Organic Shopping", "Cross-network"}
    assert channels >= {"Affiliates", "SMS", "Display"}
    campaigns = {k.split("|", 1)[1] for k, _ in expected["utm_campaign"]}
    assert {"spring sale", "november digest", "€5-off", "(none)"} <= campaigns
    assert "partner" in {k.split("|", 1)[1] for k, _ in expected["utm_source"]}
    pages = {k for k, _ in expected["page"]}
    assert not any("utm_" in p or "clid=" in p for p in pages) and any(p.endswith("?ref=42") for p in pages)


def _plan(df: Any) -> str:
    """The physical plan (AQE off, so the plan is the final one)."""
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_shuffles_do_not_grow_with_the_number_of_dimensions(spark: Any, events: list[Any]) -> None:
    from pyspark.sql import functions as F

    df = _dataframe(spark, events)
    extra = [
        Dimension("path_prefix", lambda: F.regexp_extract(F.col("url"), r"^[a-z]+://[^/]+(/[^/]*)", 1), "x"),
        Dimension("language", lambda: F.substring(F.col("user_agent"), 1, 2), "x"),
    ]
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        shipped = _plan(compute(df, all_views(), 12))
        more = _plan(compute(df, [*all_views(), *extra], 12))
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    assert shipped.count("Exchange") == more.count("Exchange") > 0
    # Events move once, partitioned by visitor; the other exchanges move aggregates (and the
    # device's table of distinct user agents).
    assert shipped.count("REPARTITION_BY_COL") == more.count("REPARTITION_BY_COL") == 1


def test_the_single_partition_pass_has_no_exchange_and_the_same_rows(spark: Any, events: list[Any]) -> None:
    """What the speed layer runs for a small micro-batch: one task, no exchange, the same rows as
    the partitioned pass (sketches compared by their estimates' registers, as bytes)."""
    df = _dataframe(spark, events)
    assert df.rdd.getNumPartitions() > 1
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = _plan(compute(df, all_views(), 12, single_partition=True))
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    assert "Exchange" not in plan, plan

    def rows(single: bool) -> dict[tuple[str, str, str], Any]:
        out = compute(df, all_views(), 12, single_partition=single).collect()
        return {(r["view"], r["key"], r["day"]): r for r in out}

    single, partitioned = rows(True), rows(False)
    assert single.keys() == partitioned.keys()
    for k, r in single.items():
        other = partitioned[k]
        assert (r["pv"], r["uv"], r["vi"], r["bo"], r["du"], r["vv"]) == (
            other["pv"],
            other["uv"],
            other["vi"],
            other["bo"],
            other["du"],
            other["vv"],
        )
        assert [(h["hour"], h["pv"], h["uv"], h["vi"], h["du"]) for h in r["hours"]] == [
            (h["hour"], h["pv"], h["uv"], h["vi"], h["du"]) for h in other["hours"]
        ]
    _check([r for r in single.values() if r["view"] == "page"], recount(events)["page"])


def test_input_columns_are_derived_from_the_declarations(spark: Any) -> None:
    assert get_view("page").input_columns(spark) == ("url",)
    assert get_view("referrer").input_columns(spark) == ("referrer", "url")
    assert get_view("device").input_columns(spark) == ("url", "user_agent")
    assert get_view("channel").input_columns(spark) == ("referrer", "url")  # through its given values
    assert input_columns(all_views(), spark) == (
        "country",
        "event_id",
        "referrer",
        "ts",
        "url",
        "user_agent",
        "visitor_id",
    )


def test_fingerprints_cover_the_declaration_and_the_shared_pass(spark: Any, monkeypatch: Any) -> None:
    from pyspark.sql import functions as F

    from views import shared_pass

    before = {v.name: fingerprint(v, LAYOUT) for v in all_views()}
    assert before == {v.name: fingerprint(v, LAYOUT) for v in all_views()}, "fingerprints must be stable"
    with declared(Dimension("country", lambda: F.lower(F.col("country")), "edited")):
        assert fingerprint(get_view("country"), LAYOUT) != before["country"]
    assert fingerprint(get_view("country"), LAYOUT) == before["country"]
    assert fingerprint(get_view("country"), LAYOUT + " changed") != before["country"], "the layout counts"

    def count_per_visitor(
        keyed: Any, dimensions: Any, by: Any
    ) -> Any:  # an edit of the pass, not of a declaration
        return shared_pass.count_per_visitor.__wrapped__(keyed, dimensions, by)  # pragma: no cover

    monkeypatch.setattr(shared_pass, "count_per_visitor", count_per_visitor)
    after = {v.name: fingerprint(v, LAYOUT) for v in all_views()}
    assert all(after[name] != fp for name, fp in before.items())


def test_views_run_unchanged_on_streaming_micro_batches(
    spark: Any, events: list[Any], tmp_path: Path
) -> None:
    """The speed layer calls the same pass inside foreachBatch: prove it works there."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "part-0.json").write_bytes(b"\n".join(encode(e) for e in events) + b"\n")
    collected: list[Any] = []

    def each_batch(batch: Any, batch_id: int) -> None:
        collected.extend(compute(batch, [get_view("page")], 12).collect())

    stream = spark.readStream.schema(event_schema()).json(str(source))
    query = (
        stream.writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    _check(collected, recount(events)["page"])


def test_parse_flags_records_that_break_the_contract(spark: Any) -> None:
    good = encode(_few_events()[0])
    future_version = orjson.dumps({**orjson.loads(good), "schema_version": 2})
    records = [good, b"{not json", b'{"event_id":"x","visitor_id":"v"}', future_version]
    df = spark.createDataFrame(
        [(v, 0, i, NOW) for i, v in enumerate(records)],
        "value binary, partition int, offset long, timestamp timestamp",
    )
    rows = parse_kafka_records(df).orderBy("kafka_offset").collect()
    assert rows[0]["_invalid"] is None and rows[0]["url"] is not None
    assert [r["_invalid"] for r in rows[1:]] == [_rejected(r) for r in records[1:]]
    assert rows[3]["_invalid"].startswith("schema_version")


def _rejected(payload: bytes) -> str:
    """The reason ingest gives for ``payload``: both layers must give the same."""
    with pytest.raises(ContractError) as rejected:
        decode(payload)
    return rejected.value.reason


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


def test_without_exact_visitors_the_pass_gives_the_same_page_views_and_sketches(
    spark: Any, events: list[Any]
) -> None:
    """What the speed layer runs (its realtime views keep page views and sketches only): no
    per-visitor count, ``uv`` null, the page views of the exact pass and sketches whose bounds cover
    its exact visitor counts."""
    from views.sketches import estimate

    df = _dataframe(spark, events)
    for single in (True, False):
        exact = {
            (r["view"], r["key"], r["day"]): r
            for r in compute(df, all_views(), 12, single_partition=single).collect()
            if r["pv"]  # the entry and exit pages count visits only, which the lean pass leaves out
        }
        rows = compute(df, all_views(), 12, single_partition=single, exact_visitors=False).collect()
        lean = {(r["view"], r["key"], r["day"]): r for r in rows}
        assert lean.keys() == exact.keys()
        for k, r in lean.items():
            other = exact[k]
            assert r["uv"] is None and r["pv"] == other["pv"]
            # A sketch of the same visitors (merged in another order: its estimate may differ
            # within its bounds), which cover the exact count.
            lean_sketch = estimate([bytes(r["sk"])])
            assert lean_sketch.lower <= other["uv"] <= lean_sketch.upper
            assert [(h["hour"], h["pv"]) for h in r["hours"]] == [
                (h["hour"], h["pv"]) for h in other["hours"]
            ]
