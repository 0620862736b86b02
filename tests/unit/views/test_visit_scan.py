"""The batch layer's visits in the scan (views.visit_scan): what the property tests of
test_visits_batch_property.py do not reach. The pass has no sort and no window; the entry and exit
pages alone (no dimension counting page views to host the visits) count the same visits; the
``by`` groups keep their visitor-days apart; and a view recorded after its task emitted the visits
fails loudly instead of being lost."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

from tests.oracle import dedup
from tests.unit.views.test_visits_batch_property import HAND_WRITTEN, _dataframe
from views import all_views, compute, get_view

EVENTS = [e for log in HAND_WRITTEN.values() for e in dedup(log.events)]
VISIT_ONLY = ("vi", "bo", "du", "vv")


def _rows(df: Any) -> set[tuple[Any, ...]]:
    hours = F.transform("hours", lambda h: h.dropFields("sk"))
    rows = df.select("view", "key", "day", *VISIT_ONLY, hours.alias("hours")).collect()
    return {(*r[:-1], tuple(tuple(h) for h in r["hours"])) for r in rows}


def test_the_pass_sorts_nothing(spark: Any) -> None:
    """Visits cost no sort and no window operator: the reason for counting them in the scan."""
    plan = compute(_dataframe(spark, EVENTS), all_views(), 12)._jdf.queryExecution().executedPlan().toString()
    assert "recordview(" in plan.lower()
    assert "Sort" not in plan and "Window" not in plan


@pytest.mark.parametrize("single_partition", [False, True])
def test_the_entry_and_exit_pages_alone_count_the_same_visits(spark: Any, single_partition: bool) -> None:
    """With no dimension that counts page views, the visits are hosted by rows of their own."""
    events = _dataframe(spark, EVENTS)
    pages = [get_view("entry_page"), get_view("exit_page")]
    alone = compute(events, pages, 12, single_partition=single_partition)
    every = compute(events, all_views(), 12, single_partition=single_partition)
    expected = _rows(every.where(F.col("view").isin("entry_page", "exit_page")))
    assert expected and _rows(alone) == expected


def test_groups_keep_their_visitor_days_apart(spark: Any) -> None:
    """Grouped ``by`` a column (the same events in two groups, one with half of them), each group's
    visits are those of its own events."""
    half = EVENTS[::2]
    both = (
        _dataframe(spark, EVENTS)
        .withColumn("g", F.lit(1))
        .unionByName(_dataframe(spark, half).withColumn("g", F.lit(2)))
    )
    grouped = compute(both, all_views(), 12, by=["g"]).cache()
    for g, part in ((1, EVENTS), (2, half)):
        alone = _rows(compute(_dataframe(spark, part), all_views(), 12))
        assert alone and _rows(grouped.where(F.col("g") == g).drop("g")) == alone
    grouped.unpersist()


def test_a_view_recorded_after_the_emit_fails(spark: Any) -> None:
    """The emit's premise (every view of the task is recorded before it) is checked, not assumed."""
    jvm = spark.sparkContext._jvm
    visits = jvm.org.apache.spark.sql.lambda_platform.visits
    gateway = spark.sparkContext._gateway
    none = gateway.new_array(gateway.jvm.int, 0)
    keys = gateway.new_array(jvm.org.apache.spark.unsafe.types.UTF8String, 0)

    def text(s: str) -> Any:
        return jvm.org.apache.spark.unsafe.types.UTF8String.fromString(s)

    scan, limit, site = "test-recorded-after-emit", 1 << 20, text("a.example.com")
    visits.RecordView.record(scan, limit, text(""), site, text("v1"), 1, 10, text("e1"), keys)
    assert visits.EmitVisits.emit(scan, none, none, 1800_000_000) is not None
    assert visits.EmitVisits.emit(scan, none, none, 1800_000_000) is None  # once per task
    with pytest.raises(Exception, match="recorded after its task emitted"):
        visits.RecordView.record(scan, limit, text(""), site, text("v1"), 1, 20, text("e2"), keys)


_TOO_MANY_VIEWS = """
import sys
from pyspark.sql import functions as F
from config.settings import get_settings
from config.spark import spark_session
from views import all_views, compute

spark = spark_session(get_settings(), "test-record-limit")
events = spark.range(20000).select(
    F.concat(F.lit("e"), F.col("id").cast("string")).alias("event_id"),
    F.timestamp_seconds(F.lit(1_790_000_000) + F.col("id")).alias("ts"),
    F.concat(F.lit("v"), (F.col("id") % 5000).cast("string")).alias("visitor_id"),
    F.lit("https://a.example.com/p").alias("url"),
    F.lit(None).cast("string").alias("referrer"),
    F.lit("Mozilla/5.0").alias("user_agent"),
    F.lit("DE").alias("country"),
)
try:
    compute(events, all_views(), 12, partitions=1).collect()
except Exception as exc:
    print(str(exc))
    sys.exit(3)
"""


def test_a_record_past_its_limit_fails_the_task_naming_the_settings() -> None:
    """A task's record of its views lives in the heap Spark leaves to user code, bounded by the
    shuffle's partitions (views.shared_pass.partitions_for) and checked: past
    ``LAMBDA_BATCH_RECORD_LIMIT_MIB`` (1 MiB here, for 20,000 views in one task) the task fails
    with what to change, not with the JVM out of heap. A JVM of its own, for the setting."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "LAMBDA_BATCH_RECORD_LIMIT_MIB": "1"}
    command = [sys.executable, "-c", _TOO_MANY_VIEWS]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-4000:]
    assert "visits in the scan: this task's record of its" in done.stdout
    assert "LAMBDA_BATCH_VIEWS_PER_TASK" in done.stdout
