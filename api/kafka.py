"""What the API asks Kafka outside of producing: is it up, where do the logs end, how big is the DLQ,
and what is in it, per source and reason.

confluent-kafka calls block, so they run in a worker thread, one at a time (a lock: concurrent
/v1/status calls must not open a consumer each), and every call has a timeout, so a Kafka outage
slows /v1/status and /readyz by at most that timeout and never touches the query routes, except
GET /v1/current-visitors, which needs the log's offsets at a time to say whether its window is covered.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from contract.codec import reason_field
from ingest.producer import DLQ_KEY_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from ingest.topics import offsets_for_time, watermarks

if TYPE_CHECKING:
    from ingest.log_retention import RetentionWatch


class KafkaUnavailable(RuntimeError):
    """Kafka did not answer (or did not acknowledge) in time."""


@dataclass(frozen=True)
class LogOffsets:
    events_end: dict[int, int]
    dlq_records: int
    dlq_by_source: dict[str, dict[str, int]] = field(default_factory=dict)
    """source -> field of the reason -> dead letters read from the DLQ (:class:`DlqTally`)."""


class DlqTally:
    """Dead letters per source and per field of their reason, read from the DLQ topic's headers.

    Each call reads on from where the last one stopped (for at most ``budget_s``), so the first call
    after a start reads the retained DLQ and later ones only what is new. A repeat of a layer's dead
    letter (a crash between sending it and committing, docs/contract.md) carries the key of the
    first and is counted once; ingest's rejects have no key and count each.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.counts: dict[str, dict[str, int]] = {}
        self._positions: dict[int, int] = {}
        self._seen: set[bytes] = set()
        self._consumer: Any = None

    def update(self, ends: dict[int, tuple[int, int]], budget_s: float) -> dict[str, dict[str, int]]:
        from confluent_kafka import Consumer, TopicPartition

        topic = self.settings.dlq_topic
        todo = {p: high for p, (low, high) in ends.items() if self._positions.get(p, low) < high}
        if not todo:
            return self.snapshot()
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    "bootstrap.servers": self.settings.kafka_bootstrap,
                    "group.id": "lambda-api-dlq-tally",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                }
            )
        self._consumer.assign(
            [TopicPartition(topic, p, max(self._positions.get(p, 0), ends[p][0])) for p in todo]
        )
        deadline = time.monotonic() + budget_s
        while todo and time.monotonic() < deadline:
            for msg in self._consumer.consume(1000, timeout=min(0.5, max(0.0, deadline - time.monotonic()))):
                if msg.error() is not None:
                    continue
                p, offset = msg.partition() or 0, msg.offset() or 0
                self._positions[p] = offset + 1
                if offset + 1 >= todo.get(p, 0):
                    todo.pop(p, None)
                self._count(dict(msg.headers() or []))
        return self.snapshot()

    def _count(self, headers: dict[str, bytes | None]) -> None:
        key = headers.get(DLQ_KEY_HEADER)
        if key is not None:
            if key in self._seen:
                return
            self._seen.add(key)
        source = (headers.get(DLQ_SOURCE_HEADER) or b"unknown").decode(errors="replace")
        reason = reason_field((headers.get(DLQ_REASON_HEADER) or b"").decode(errors="replace")) or "unknown"
        per_reason = self.counts.setdefault(source, {})
        per_reason[reason] = per_reason.get(reason, 0) + 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {source: dict(reasons) for source, reasons in self.counts.items()}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


RETENTION_EVERY_S = 60.0
"""How long a retention watch is reused: it reads a record per partition, and ages move slowly."""


class KafkaProbe:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self.tally = DlqTally(settings)
        self._retention: tuple[float, dict[int, int], RetentionWatch] | None = None
        self._appended: tuple[int, dict[int, int]] | None = None

    def _retention_watch(self, absorbed: dict[int, int]) -> RetentionWatch:
        from ingest.log_retention import watch

        now = time.monotonic()
        with self._lock:
            cached = self._retention
            if cached is not None and cached[1] == absorbed and now - cached[0] < RETENTION_EVERY_S:
                return cached[2]
            try:
                result = watch(self.settings, absorbed, self.settings.api_kafka_timeout_s)
            except Exception as exc:  # confluent-kafka raises KafkaException, RuntimeError, ...
                raise KafkaUnavailable(f"Kafka: {exc}") from exc
            self._retention = (now, dict(absorbed), result)
            return result

    async def retention(self, absorbed: dict[int, int]) -> RetentionWatch:
        """How old the oldest record not absorbed yet is, against the topic's retention."""
        return await asyncio.to_thread(self._retention_watch, absorbed)

    def _offsets(self) -> LogOffsets:
        s, timeout = self.settings, self.settings.api_kafka_timeout_s
        try:
            with self._lock:
                events = watermarks(s, timeout)
                dlq = watermarks(s, timeout, s.dlq_topic)
                by_source = self.tally.update(dlq, timeout)
        except Exception as exc:  # confluent-kafka raises KafkaException, RuntimeError, ...
            raise KafkaUnavailable(f"Kafka: {exc}") from exc
        return LogOffsets(
            {p: high for p, (_, high) in events.items()}, sum(h - lo for lo, h in dlq.values()), by_source
        )

    async def offsets(self) -> LogOffsets:
        return await asyncio.to_thread(self._offsets)

    def close(self) -> None:
        with self._lock:
            self.tally.close()

    def _appended_from(self, timestamp_ms: int) -> dict[int, int]:
        second = timestamp_ms // 1000
        with self._lock:
            cached = self._appended
            if cached is not None and cached[0] == second:
                return cached[1]
            try:
                found = offsets_for_time(self.settings, second * 1000, self.settings.api_kafka_timeout_s)
            except Exception as exc:  # confluent-kafka raises KafkaException, RuntimeError, ...
                raise KafkaUnavailable(f"Kafka: {exc}") from exc
            self._appended = (second, found)
            return found

    async def appended_from(self, timestamp_ms: int) -> dict[int, int]:
        """Per partition of `events`, the first offset appended at or after ``timestamp_ms`` rounded
        down to its second (the log end where none is): one Kafka request per second of time asked,
        however many requests ask it (GET /v1/current-visitors)."""
        return await asyncio.to_thread(self._appended_from, timestamp_ms)

    async def end_offsets(self) -> dict[int, int]:
        return (await self.offsets()).events_end
