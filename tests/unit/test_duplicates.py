"""The dedup rule (contract.duplicates): the Python reference, the batch layer's reading of it and
the speed layer's JVM state mark the same records, over generated logs.

The logs have re-sends inside and outside the window (and at its very edge), in the same partition
and in another one, rejected records sharing ids with accepted ones, and log-append times that go
back a little. The speed layer's side runs as it does in the stream: the marker in the task that
reads each partition in offset order, over consecutive micro-batches, with its state dropped and
rebuilt from the window before a micro-batch (as after a crash) at a generated point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract.duplicates import GAP_COLUMN, GRACE_MS, LogEntry, duplicates, is_duplicate, previous_gap

WINDOW_MS = 1_000


@st.composite
def logs(draw: st.DrawFn) -> list[LogEntry]:
    """Up to three partitions of records with ids from a small pool (so that they repeat)."""
    entries = []
    for partition in range(draw(st.integers(1, 3))):
        t = draw(st.integers(1_700_000_000_000, 1_700_000_100_000))
        for offset in range(draw(st.integers(0, 40))):
            t += draw(
                st.one_of(
                    st.integers(0, 400),
                    st.sampled_from([WINDOW_MS, WINDOW_MS + 1, WINDOW_MS - 1]),
                    st.integers(WINDOW_MS, 4 * WINDOW_MS),
                    st.integers(-300, 0),
                )
            )
            accepted = draw(st.booleans()) or draw(st.booleans()) or draw(st.booleans())
            ident = f"e{draw(st.integers(0, 6))}" if accepted else None
            entries.append(LogEntry(partition, offset, t, ident))
    return entries


def test_reference_by_hand() -> None:
    log = [
        LogEntry(0, 0, 1000, "a"),
        LogEntry(0, 1, 1500, None),  # rejected: takes no part
        LogEntry(0, 2, 2000, "a"),  # 1000 ms after offset 0: a duplicate (at most the window)
        LogEntry(0, 3, 3001, "a"),  # 1001 ms after its last copy (offset 2): not a duplicate
        LogEntry(1, 0, 3001, "a"),  # another partition: never a duplicate of partition 0's
        LogEntry(0, 4, 3500, "b"),
        LogEntry(0, 5, 3400, "b"),  # the log-append time went back: still the last copy's gap
    ]
    assert duplicates(log, 1000) == {(0, 2), (0, 5)}


@dataclass
class Speed:
    """The speed layer's marker driven as the stream drives it."""

    spark: Any
    dedup: Any

    def frame(self, entries: list[LogEntry]) -> Any:
        from pyspark.sql import functions as F

        rows = [(e.partition, e.offset, e.log_time_ms, e.event_id) for e in entries]
        df = self.spark.createDataFrame(
            rows, "kafka_partition INT, kafka_offset BIGINT, log_ms BIGINT, event_id STRING"
        )
        return (
            df.repartition(3, "kafka_partition")
            .sortWithinPartitions("kafka_partition", "kafka_offset")
            .select(
                "kafka_partition",
                "kafka_offset",
                F.timestamp_millis("log_ms").alias("log_time"),
                "event_id",
                F.when(F.col("event_id").isNull(), F.lit("rejected")).alias("_invalid"),
            )
        )

    def marks(self, entries: list[LogEntry], cuts: list[int], crash_at: int | None) -> set[tuple[int, int]]:
        """Duplicates the marker finds over micro-batches ending at ``cuts`` (offsets, every
        partition), its state dropped and rebuilt before micro-batch ``crash_at``."""
        from speed_layer.dedup import DUPLICATE_COLUMN

        self.dedup.forget()
        partitions = sorted({e.partition for e in entries})
        found: set[tuple[int, int]] = set()
        start = 0
        for i, end in enumerate([*cuts, 1 << 30]):
            batch = [e for e in entries if start <= e.offset < end]
            starts = {p: min(start, len([e for e in entries if e.partition == p])) for p in partitions}
            ends = {p: len([e for e in entries if e.partition == p and e.offset < end]) for p in partitions}
            marked, marker = self.dedup.mark(self.frame(batch), starts, ends)
            if i == 0:
                marker.startEmpty(",".join(f"{p}:0:{-(1 << 60)}" for p in partitions))
            elif i == crash_at:
                self.dedup.forget()
                self.rebuild(marker, entries, starts)
            for r in marked.where(DUPLICATE_COLUMN).collect():
                found.add((r["kafka_partition"], r["kafka_offset"]))
            # Evaluated again (a second job over the micro-batch): the same verdicts.
            again = {
                (r["kafka_partition"], r["kafka_offset"]) for r in marked.where(DUPLICATE_COLUMN).collect()
            }
            assert again == {d for d in found if start <= d[1] < end}
            start = end
        return found

    def rebuild(self, marker: Any, entries: list[LogEntry], starts: dict[int, int]) -> None:
        """What :meth:`ScanDedup.rebuild` does, with the window taken from ``entries`` as Kafka's
        time index would give it (the first offset whose running maximum time reaches the floor)."""
        window: list[LogEntry] = []
        floors: dict[int, tuple[int, int]] = {}
        fed = set()
        for p, at in starts.items():
            mine = [e for e in entries if e.partition == p]
            if at >= len(mine):
                continue
            floor = mine[at].log_time_ms - WINDOW_MS - GRACE_MS
            floors[p] = (at, floor)
            running = -(1 << 62)
            for e in mine[:at]:
                running = max(running, e.log_time_ms)
                if running >= floor:
                    window.append(e)
                    fed.add(p)
        self.dedup.feed(marker, self.frame(window) if window else None, floors, fed)


@pytest.fixture(scope="module")
def speed(spark: Any) -> Speed:
    from config.settings import get_settings
    from speed_layer.dedup import ScanDedup

    s = get_settings().model_copy(update={"speed_dedup_window_s": 1, "events_topic": "dedup-property"})
    return Speed(spark, ScanDedup(spark, s))


def batch_marks(spark: Any, entries: list[LogEntry]) -> set[tuple[int, int]]:
    from pyspark.sql import functions as F

    accepted = [e for e in entries if e.event_id is not None]
    if not accepted:
        return set()
    df = spark.createDataFrame(
        [(e.partition, e.offset, e.log_time_ms, e.event_id) for e in accepted],
        "kafka_partition INT, kafka_offset BIGINT, log_ms BIGINT, event_id STRING",
    ).withColumn("log_time", F.timestamp_millis("log_ms"))
    rows = previous_gap(df).where(is_duplicate(F.col(GAP_COLUMN), WINDOW_MS)).collect()
    return {(r["kafka_partition"], r["kafka_offset"]) for r in rows}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    log=logs(),
    cuts=st.lists(st.integers(1, 40), max_size=3).map(sorted),
    crash=st.one_of(st.none(), st.integers(1, 3)),
)
def test_reference_batch_and_speed_agree(
    spark: Any, speed: Speed, log: list[LogEntry], cuts: list[int], crash: int | None
) -> None:
    expected = duplicates(log, WINDOW_MS)
    assert batch_marks(spark, log) == expected
    assert speed.marks(log, sorted(set(cuts)), crash) == expected
