"""The Kafka producer every ingest path uses: valid events to `events`, rejects to the DLQ.

Like a sink with ``add()`` and ``flush()``: records are buffered by librdkafka and ``flush()`` is
the point where every one of them is known to be acknowledged (acks=all) or counted as failed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message, Producer
from tenacity import Retrying, retry_if_exception_type, retry_if_result, stop_after_delay, wait_fixed

from config.settings import Settings
from contract import PageView, encode
from contract.codec import reason_field

log = logging.getLogger(__name__)

DLQ_REASON_HEADER = "dlq.reason"
DLQ_SOURCE_HEADER = "dlq.source"
DLQ_KEY_HEADER = "dlq.key"
QUEUE_FULL_POLL_S = 0.05
"""How long librdkafka is served between two tries of a produce that found its queue full."""


def dlq_key(source: str, topic: str, partition: int, offset: int) -> str:
    """The identity of a dead letter a layer sends for a record of the log: a crash can make a layer
    send it again (docs/contract.md), and the repeat carries the same key, so a consumer of the DLQ
    can drop it. Ingest's rejects never reached the log and have no key."""
    return f"{source}:{topic}:{partition}:{offset}"


def dlq_headers(reason: str, source: str, key: str | None = None) -> list[tuple[str, str | bytes | None]]:
    """The headers of a dead letter: its reason, its source and, for a record of the log, its key."""
    headers: list[tuple[str, str | bytes | None]] = [
        (DLQ_REASON_HEADER, reason.encode()),
        (DLQ_SOURCE_HEADER, source.encode()),
    ]
    if key is not None:
        headers.append((DLQ_KEY_HEADER, key.encode()))
    return headers


@dataclass
class ProduceStats:
    """Counts a run reports at its end; `failed` must be zero for the run to succeed."""

    sent: int = 0
    rejected: int = 0
    failed: int = 0
    reject_reasons: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def count_reject(self, reason: str) -> None:
        self.rejected += 1
        # Group by the field part of the reason ("url: ...") so the summary stays short.
        key = reason_field(reason)
        self.reject_reasons[key] = self.reject_reasons.get(key, 0) + 1


def producer_config(settings: Settings, **overrides: Any) -> dict[str, Any]:
    """Throughput-tuned, loss-free settings: idempotence on, acks from all in-sync replicas."""
    config: dict[str, Any] = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "batch.num.messages": 50_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "message.timeout.ms": 120_000,
    }
    config.update(overrides)
    return config


class EventSink(Protocol):
    """Where the ingest pipeline puts records: Kafka in production, memory in unit tests."""

    stats: ProduceStats

    def add(self, event: PageView) -> int: ...

    def dead_letter(self, payload: bytes, reason: str, source: str, key: str | None = None) -> None: ...

    def flush(self, timeout: float = 120.0) -> ProduceStats: ...


class EventProducer:
    """Produces validated events keyed by visitor, and rejects with their reason.

    Keying by visitor keeps one visitor's events in order on one partition. With
    ``report_offsets`` every acknowledged record reports its partition and offset (the API needs
    them for read-your-writes); otherwise librdkafka reports only errors, which saves a Python
    callback per record on the bulk paths.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        events_topic: str | None = None,
        dlq_topic: str | None = None,
        report_offsets: bool = False,
        **config_overrides: Any,
    ) -> None:
        self.events_topic = events_topic or settings.events_topic
        self.dlq_topic = dlq_topic or settings.dlq_topic
        self.stats = ProduceStats()
        self.report_offsets = report_offsets
        self._offsets: dict[int, tuple[int, int]] = {}
        config = producer_config(settings, **config_overrides)
        config["delivery.report.only.error"] = not report_offsets
        config["on_delivery"] = self._on_delivery
        config["error_cb"] = self._on_error
        self._producer = Producer(config)
        self._next_index = 0

    # --- callbacks (run inside poll/flush on this thread) ----------------------------------------
    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.stats.failed += 1
            if len(self.stats.errors) < 20:
                self.stats.errors.append(f"{msg.topic()}: {err.str()}")

    def _on_error(self, err: KafkaError) -> None:
        log.warning("kafka: %s", err.str())

    # --- the sink interface ----------------------------------------------------------------------
    def add(self, event: PageView) -> int:
        """Queue one valid event; returns its index for :meth:`offsets`."""
        return self._produce(self.events_topic, encode(event), event.visitor_id.encode())

    def dead_letter(self, payload: bytes, reason: str, source: str, key: str | None = None) -> None:
        """Queue a rejected record with its original bytes and the reason it was rejected.

        ``key`` (:func:`dlq_key`) identifies a record of the log a layer rejects: it is the
        message key and the ``dlq.key`` header, the same on every repeat of that dead letter.
        """
        self.stats.count_reject(reason)
        headers = dlq_headers(reason, source, key)
        self._produce(self.dlq_topic, payload, None if key is None else key.encode(), headers)

    def _produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> int:
        index = self._next_index
        self._next_index += 1
        try:
            self._send(topic, value, key, headers, index)
        except BufferError:
            # The local queue is full: let librdkafka drain it, then retry (backpressure). Only this
            # slow path goes through tenacity: a Retrying call costs more than a whole record's
            # budget (docs/design.md, "Measured by hand").
            Retrying(
                retry=retry_if_exception_type(BufferError),
                wait=wait_fixed(QUEUE_FULL_POLL_S),
                sleep=self._drain,
            )(self._send, topic, value, key, headers, index)
        if topic == self.events_topic:
            self.stats.sent += 1
        if index & 1023 == 0:
            # Serve delivery callbacks now and then; once per record costs more than the produce.
            self._producer.poll(0)
        return index

    def _send(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: list[tuple[str, str | bytes | None]] | None,
        index: int,
    ) -> None:
        if self.report_offsets:
            self._producer.produce(
                topic, value, key, headers=headers, on_delivery=partial(self._deliver_indexed, index)
            )
        else:
            self._producer.produce(topic, value, key, headers=headers)

    def _drain(self, seconds: float) -> None:
        """Tenacity's pause between two tries of a produce: serve librdkafka meanwhile."""
        self._producer.poll(seconds)

    def _deliver_indexed(self, index: int, err: KafkaError | None, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        if err is not None or partition is None or offset is None:
            self._on_delivery(err, msg)
        else:
            self._offsets[index] = (partition, offset)

    def flush(self, timeout: float = 120.0) -> ProduceStats:
        """Block until every queued record is acknowledged or failed; raise if any is left."""
        started = time.monotonic()
        # librdkafka's flush can return before its timeout with records still queued: flush again
        # until none is left or the time is up.
        remaining: int = Retrying(
            stop=stop_after_delay(timeout),
            retry=retry_if_result(bool),
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else -1,
        )(lambda: self._producer.flush(max(0.0, timeout - (time.monotonic() - started))))
        if remaining:
            raise TimeoutError(f"{remaining} records still unacknowledged after {timeout:.0f} s")
        return self.stats

    def take_offsets(self, index: int) -> tuple[int, int] | None:
        """(partition, offset) of an acknowledged record, with ``report_offsets`` on, forgotten once
        taken: a long-lived producer (the API's) must not keep every offset it ever reported."""
        return self._offsets.pop(index, None)

    def poll(self, timeout: float = 0.0) -> None:
        self._producer.poll(timeout)
