"""The platform's one dedup rule, and the parts of it every implementation shares.

**A record is a duplicate when the last earlier record (by offset) of the same Kafka partition
that the contract accepts and carries the same ``event_id`` was appended at most the window
(``LAMBDA_SPEED_DEDUP_WINDOW_S``) of log-append time before it.**

- Only records the contract accepts take part: a rejected record neither is a duplicate nor makes
  one (otherwise a dead-lettered record would shadow its corrected re-send).
- "The last earlier record" counts every earlier accepted record, duplicates included: the state
  an implementation keeps is, per event id, the log-append time of its last record. That makes the
  state after any offset a function of the window of log before it alone (not of the decisions
  made before the window), so a layer that lost it rebuilds it exactly by reading that window back.
- Nothing but the partition, the offset, the log-append time and the id decides: a re-send whose
  other fields changed is still a duplicate, and a re-send that lands in another partition (the
  producer did not key it by ``visitor_id`` like the original) is not: both layers count it twice,
  so their answers agree (docs/contract.md).

Three implementations hold to it, and a property test holds them to each other
(tests/unit/test_duplicates.py): :func:`duplicates`, the reference in plain Python; the batch
layer's, :func:`previous_gap` over the absorbed records (a ``lag`` per partition and id);
the speed layer's, a JVM function in the Kafka scan with a state per partition
(toolchain/contract-udf, :mod:`speed_layer.dedup`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

GRACE_MS = 60_000
"""How far a partition's log-append time may go back (a broker's clock stepped back) before the
speed layer's state no longer holds the window of a record: it then fails loudly. The window read
back to rebuild a state starts this much earlier too."""

GAP_COLUMN = "_gap_ms"
""":func:`previous_gap`'s column: milliseconds since the last earlier accepted record of the same
partition and id, null if there is none."""


@dataclass(frozen=True)
class LogEntry:
    """What the rule reads of a record."""

    partition: int
    offset: int
    log_time_ms: int
    event_id: str | None
    """None for a record the contract rejects."""


def duplicates(entries: Iterable[LogEntry], window_ms: int) -> set[tuple[int, int]]:
    """The reference: (partition, offset) of every duplicate among ``entries``."""
    last: dict[tuple[int, str], int] = {}
    found: set[tuple[int, int]] = set()
    for e in sorted(entries, key=lambda e: (e.partition, e.offset)):
        if e.event_id is None:
            continue
        key = (e.partition, e.event_id)
        previous = last.get(key)
        if previous is not None and e.log_time_ms - previous <= window_ms:
            found.add((e.partition, e.offset))
        last[key] = e.log_time_ms
    return found


def previous_gap(accepted: DataFrame) -> DataFrame:
    """``accepted`` (records the contract accepts, with ``kafka_partition``, ``kafka_offset``,
    ``log_time`` and ``event_id``) plus :data:`GAP_COLUMN`: the batch layer's reading of the rule."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    millis = F.unix_millis(F.col("log_time"))
    by_id = Window.partitionBy("kafka_partition", "event_id").orderBy("kafka_offset")
    return accepted.withColumn(GAP_COLUMN, millis - F.lag(millis).over(by_id))


def is_duplicate(gap: Column, window_ms: int) -> Column:
    """The rule on :data:`GAP_COLUMN`."""
    return gap.isNotNull() & (gap <= window_ms)
