"""A pure-Python recount of events: what every view must say, computed without Spark.

The strongest check the platform has: the batch views (and later the merged answers) are compared
against this recount of the very events that were produced.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from contract import PageView, site_of
from tests import oracle_campaigns as campaigns
from views.devices import classify

DIMENSION_KEYS: dict[str, Callable[[PageView], str]] = {
    "page": lambda e: campaigns.page(e.url),
    "site": lambda e: site_of(e.url),
    "referrer": lambda e: campaigns.per_site(campaigns.referrer_source(e), e),
    "country": lambda e: f"{site_of(e.url)}|{e.country or '(unknown)'}",
    "device": lambda e: f"{site_of(e.url)}|{classify(e.user_agent)}",
    "utm_source": lambda e: campaigns.per_site(campaigns.utm(e.url, "source"), e),
    "utm_medium": lambda e: campaigns.per_site(campaigns.utm(e.url, "medium"), e),
    "utm_campaign": lambda e: campaigns.per_site(campaigns.utm(e.url, "campaign"), e),
    "channel": lambda e: campaigns.per_site(campaigns.channel(e), e),
}
"""The stored key of each shipped dimension, recomputed in plain Python from the event (the page,
UTM values and channel by tests.oracle_campaigns' own reading of the rules)."""


@dataclass
class Bucket:
    pv: int = 0
    visitors: set[str] = field(default_factory=set)
    hours_pv: list[int] = field(default_factory=lambda: [0] * 24)
    hours_visitors: list[set[str]] = field(default_factory=lambda: [set() for _ in range(24)])


Recount = dict[str, dict[tuple[str, str], Bucket]]
"""view -> (key, day) -> bucket."""


def dedup(events: Iterable[PageView]) -> list[PageView]:
    """Each (event day, event_id) once: for events whose re-sends are exact copies sent within the
    dedup window to the partition of their original (what the tests' traffic sends), the same
    events as the rule of contract.duplicates keeps; :func:`first_copies` applies the rule itself
    to records read from the log."""
    seen: set[tuple[str, str]] = set()
    out = []
    for e in events:
        ident = (e.ts.strftime("%Y-%m-%d"), e.event_id)
        if ident not in seen:
            seen.add(ident)
            out.append(e)
    return out


def recount(
    events: Iterable[PageView],
    keys: Mapping[str, Callable[[PageView], str]] | None = None,
    *,
    deduplicate: bool = True,
) -> Recount:
    """Every view's buckets (the shipped dimensions, or the views of ``keys``), of ``events``
    deduplicated by :func:`dedup` unless already deduplicated (``deduplicate=False``: the events
    :func:`first_copies` keeps)."""
    key_of = DIMENSION_KEYS if keys is None else keys
    result: Recount = {view: defaultdict(Bucket) for view in key_of}
    for e in dedup(events) if deduplicate else events:
        day, hour = e.ts.strftime("%Y-%m-%d"), e.ts.hour
        for view, fn in key_of.items():
            b = result[view][(fn(e), day)]
            b.pv += 1
            b.visitors.add(e.visitor_id)
            b.hours_pv[hour] += 1
            b.hours_visitors[hour].add(e.visitor_id)
    return {view: dict(buckets) for view, buckets in result.items()}


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    event: PageView | None
    """None for a record that breaks the contract."""
    log_time_ms: int = 0
    """The broker's log-append time."""


def read_log(bootstrap: str, topic: str) -> list[LogRecord]:
    """Every record of ``topic``, in offset order per partition: the oracle's view of the log."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from contract import ContractError, decode
    from ingest.topics import LATEST, partition_offsets

    ends = partition_offsets(AdminClient({"bootstrap.servers": bootstrap}), topic, LATEST, 10)
    partitions = sorted(ends)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "oracle", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[LogRecord] = []
        remaining = {p for p in partitions if ends[p] > 0}
        while remaining:
            for msg in consumer.consume(10_000, timeout=2.0):
                if msg.error() is not None:
                    continue
                try:
                    event: PageView | None = decode(msg.value() or b"")
                except ContractError:
                    event = None
                records.append(LogRecord(msg.partition() or 0, msg.offset() or 0, event, msg.timestamp()[1]))
                if (msg.offset() or 0) + 1 >= ends[msg.partition() or 0]:
                    remaining.discard(msg.partition() or 0)
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def first_copies(log: Iterable[LogRecord], window_s: int | None = None) -> list[LogRecord]:
    """The accepted records the dedup rule keeps (contract.duplicates, the reference), with the
    window of the settings unless given."""
    from config.settings import get_settings
    from contract.duplicates import LogEntry, duplicates

    records = list(log)
    window_ms = (get_settings().speed_dedup_window_s if window_s is None else window_s) * 1000
    entries = (
        LogEntry(r.partition, r.offset, r.log_time_ms, r.event.event_id if r.event else None) for r in records
    )
    dropped = duplicates(entries, window_ms)
    return [r for r in records if r.event is not None and (r.partition, r.offset) not in dropped]


def recount_past(
    log: Iterable[LogRecord],
    cut: dict[int, int],
    keys: Mapping[str, Callable[[PageView], str]] | None = None,
) -> Recount:
    """What the realtime views of a generation with ``cut`` must hold: events whose first copy is
    at or past the cut."""
    return recount(
        (r.event for r in first_copies(log) if r.event and r.offset >= cut.get(r.partition, 0)), keys
    )
